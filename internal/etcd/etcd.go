// Package etcd is the operator's narrow etcd client: an interface over
// go.etcd.io/etcd/client/v3 that returns the package's own small types,
// bounds every call with its own timeout, and keeps the membership safety
// rules (safety.go) next to the calls they guard. Reconcilers depend on
// Client only; their unit tests use the fake in internal/etcd/fake.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Member is one etcd member.
type Member struct {
	// ID is the member ID etcd assigned; FormatID prints it as etcdctl does.
	ID uint64
	// Name is the member's --name; empty until a newly added member starts.
	Name string
	// PeerURLs are the URLs the member is reached at by its peers.
	PeerURLs []string
	// ClientURLs are the URLs the member advertises to clients; empty until
	// a newly added member starts.
	ClientURLs []string
	// IsLearner is set while the member is a non-voting learner.
	IsLearner bool
}

// Status is what one member reports about itself (Maintenance.Status).
type Status struct {
	// Endpoint is the endpoint that was asked.
	Endpoint string
	// MemberID is the ID of the member serving Endpoint.
	MemberID uint64
	// ClusterID is the ID of the cluster the member belongs to.
	ClusterID uint64
	// Leader is the ID of the leader as the member sees it; 0 when it knows
	// of none.
	Leader uint64
	// Version is the member's server version, such as "3.6.16".
	Version string
	// DBSize is the size of the backend database file in bytes;
	// DBSizeInUse is the part of it holding live data (the rest is freed by
	// defragmentation).
	DBSize, DBSizeInUse int64
	// RaftTerm, RaftIndex and RaftAppliedIndex are the member's raft
	// progress; a learner has caught up when its applied index is close to
	// the leader's.
	RaftTerm, RaftIndex, RaftAppliedIndex uint64
	// IsLearner is set when the member is a learner.
	IsLearner bool
	// Errors are the member's own error reports, such as active alarms.
	Errors []string
}

// ReportsAlarms tells whether the member's status lists an active alarm:
// every member lists every alarm of the cluster it has applied, as
// "memberID:<id> alarm:<type>". Status is served by the member alone,
// whereas listing the alarms (Client.Alarms) is a raft proposal: an
// entry in the log each time.
func (s Status) ReportsAlarms() bool {
	return slices.ContainsFunc(s.Errors, func(e string) bool { return strings.Contains(e, "alarm:") })
}

// Alarm is an active alarm.
type Alarm struct {
	// MemberID is the member that raised the alarm.
	MemberID uint64
	// Type is the alarm type as etcd names it: "NOSPACE" or "CORRUPT".
	Type string
}

// Alarm types.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

var (
	// ErrLearnerNotReady is returned (wrapped) by Promote when etcd refuses
	// to promote a learner that has not caught up with the leader yet. It is
	// a wait, not a failure: try again later.
	ErrLearnerNotReady = errors.New("learner has not caught up with the leader yet")
	// ErrMemberNotFound is returned (wrapped) by Promote and Remove when no
	// member has the given ID, e.g. because an earlier pass removed it.
	ErrMemberNotFound = errors.New("member not found")
	// ErrUnhealthyCluster is returned (wrapped) by AddVoter and Remove when
	// etcd's strict reconfiguration check refuses a change of voters: the
	// member handling it must have been connected, for the last 5 seconds,
	// to enough voting peers that a quorum stays connected after the change.
	// Right after a member starts or leadership moves, this is a wait of up
	// to 5s, not a failure.
	ErrUnhealthyCluster = errors.New("etcd refuses membership changes until its leader has been connected to its peers for 5s")
	// ErrAlreadyCompacted is returned (wrapped) by Compact when the key
	// space is compacted up to its latest revision already: nothing was
	// dropped.
	ErrAlreadyCompacted = errors.New("the key space is compacted up to its latest revision already")
)

// Client talks to one etcd cluster. Every call is bounded by the client's
// CallTimeout on top of the caller's context.
type Client interface {
	// MemberList returns the cluster ID and members, read linearizably.
	MemberList(ctx context.Context) (clusterID uint64, members []Member, err error)
	// LocalMemberList returns the cluster ID and members as the member
	// behind the first endpoint knows them (a serializable read): it
	// answers without a quorum, and may be stale.
	LocalMemberList(ctx context.Context) (clusterID uint64, members []Member, err error)
	// AddLearner adds a learner with peerURLs and returns it (Name is empty
	// until it starts) and the new member list.
	AddLearner(ctx context.Context, peerURLs []string) (Member, []Member, error)
	// AddVoter adds a voting member (for versions without learners, or
	// bootstrap) and returns it and the new member list. It returns an error
	// wrapping ErrUnhealthyCluster when etcd asks to wait.
	AddVoter(ctx context.Context, peerURLs []string) (Member, []Member, error)
	// Promote promotes a learner to a voting member. It returns an error
	// wrapping ErrLearnerNotReady when etcd refuses because the learner has
	// not caught up yet.
	Promote(ctx context.Context, id uint64) error
	// Remove removes a member. It returns an error wrapping ErrMemberNotFound
	// when there is no such member, and one wrapping ErrUnhealthyCluster when
	// etcd asks to wait.
	Remove(ctx context.Context, id uint64) error
	// Status asks one endpoint, and only that one, for its status.
	Status(ctx context.Context, endpoint string) (Status, error)
	// MoveLeader moves leadership to the voting member to. It finds the
	// current leader and sends the request to it; moving leadership to the
	// current leader does nothing.
	MoveLeader(ctx context.Context, to uint64) error
	// Health reports whether one endpoint, and only that one, serves a
	// linearizable read. A learner cannot serve one: for a learner, Health
	// checks that it knows a leader and serves a serializable read.
	Health(ctx context.Context, endpoint string) error
	// Alarms returns the cluster's active alarms.
	Alarms(ctx context.Context) ([]Alarm, error)
	// DisarmAlarm clears an alarm.
	DisarmAlarm(ctx context.Context, a Alarm) error
	// Compact compacts the key space up to the latest revision, which it
	// returns: older revisions of keys are dropped for good. When that is
	// done already it returns ErrAlreadyCompacted.
	Compact(ctx context.Context) (int64, error)
	// Defragment defragments the backend of one endpoint, and only that
	// one, giving the space freed by compaction back to the file system.
	// The member does not serve while it defragments.
	Defragment(ctx context.Context, endpoint string) error
	// AuthEnabled tells whether etcd authentication is on.
	AuthEnabled(ctx context.Context) (bool, error)
	// EnableAuth makes sure the root user exists and holds the root role,
	// and turns authentication on. With rootPassword empty root has no
	// password and authenticates by the CN of its client certificate;
	// otherwise root's password is made rootPassword. Safe to repeat.
	EnableAuth(ctx context.Context, rootPassword string) error
	// DisableAuth turns authentication off. Safe to repeat.
	DisableAuth(ctx context.Context) error
	// EnsureTenant makes etcd hold t: a role named t.User whose only
	// permission is read-write on the keys under t.Prefix, and a user of
	// that name holding that role and nothing else, with t.Password (or
	// no password when it is empty). Safe to repeat; it repairs drift.
	EnsureTenant(ctx context.Context, t Tenant) error
	// RemoveTenant deletes the user and the role named user; missing ones
	// are not an error.
	RemoveTenant(ctx context.Context, user string) error
	// DeletePrefix deletes every key under prefix and returns how many
	// there were.
	DeletePrefix(ctx context.Context, prefix string) (int64, error)
	// Revision is the cluster's current revision, read linearizably: every
	// write acknowledged before the call is at or below it.
	Revision(ctx context.Context) (int64, error)
	// Snapshot streams the backend database of one endpoint, and only that
	// one, into w, as etcdctl snapshot save does: the database followed by
	// its SHA-256. It returns the version of the storage format as the stream
	// reports it ("" before 3.6). Bounded by ctx alone: a large database
	// takes longer than a call timeout.
	Snapshot(ctx context.Context, endpoint string, w io.Writer) (storageVersion string, err error)
	// Close releases the client's connections.
	Close() error
}

// Config says how to reach a cluster.
type Config struct {
	// Endpoints are the client URLs of the members to talk to, such as
	// "https://etcd-0.etcd.ns.svc:2379".
	Endpoints []string
	// TLS is the client TLS configuration; nil for plain HTTP.
	TLS *tls.Config
	// Username and Password authenticate the client when etcd auth is on.
	Username, Password string
	// DialTimeout bounds fetching an auth token in New. Defaults to 5s.
	DialTimeout time.Duration
	// CallTimeout bounds every call of the Client, as a whole (MoveLeader's
	// search for the leader included). Defaults to 5s.
	CallTimeout time.Duration
	// ConnectWait is how long a Status or Health call lets a connection
	// be made before it reports the member as not answering (statusOn).
	// Defaults to 1s, far more than a handshake takes between Pods; a
	// client that reaches members through a port-forward, as the kubectl
	// plugin does, needs more.
	ConnectWait time.Duration
	// Logger receives clientv3's logs. Defaults to zap.NewNop(): the
	// client's retries are noisy and its errors reach the caller anyway.
	Logger *zap.Logger
}

const (
	defaultDialTimeout = 5 * time.Second
	defaultCallTimeout = 5 * time.Second
	defaultConnectWait = time.Second
	// Keepalive pings find a dead connection before a call waits on it; the
	// same values kube-apiserver uses for its etcd client.
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	// healthKey is the key Health reads, as etcdctl endpoint health does.
	healthKey = "health"
)

type client struct {
	cli         *clientv3.Client
	cfg         clientv3.Config // cli's, for a client of one endpoint (Snapshot)
	callTimeout time.Duration
	connectWait time.Duration

	// conns are the connections to one endpoint each (endpointConn),
	// kept until Close.
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

var _ Client = (*client)(nil)

// New returns a Client for the cluster at cfg.Endpoints. It does not wait
// for a connection (clientv3 v3.7 connects lazily): unreachable endpoints
// show up as errors of the first calls. With Username set, New fetches an
// auth token and fails when it cannot within DialTimeout.
func New(cfg Config) (Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd client needs at least one endpoint")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = defaultCallTimeout
	}
	if cfg.ConnectWait <= 0 {
		cfg.ConnectWait = defaultConnectWait
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cliCfg := clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    keepaliveTime,
		DialKeepAliveTimeout: keepaliveTimeout,
		Logger:               cfg.Logger,
	}
	cli, err := clientv3.New(cliCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %v: %w", cfg.Endpoints, err)
	}
	return &client{cli: cli, cfg: cliCfg, callTimeout: cfg.CallTimeout, connectWait: cfg.ConnectWait, conns: map[string]*grpc.ClientConn{}}, nil
}

// FormatID prints a member ID as etcdctl does (lowercase hex).
func FormatID(id uint64) string {
	return strconv.FormatUint(id, 16)
}

// ParseID parses a member ID printed by FormatID or etcdctl.
func ParseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parse member ID %q: want a hexadecimal number such as 8e9e05c52164694d", s)
	}
	return id, nil
}

func (c *client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.callTimeout)
}

func (c *client) MemberList(ctx context.Context) (uint64, []Member, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// clientv3 asks for a linearizable list unless WithSerializable is given.
	resp, err := c.cli.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("list members: %w", err)
	}
	return resp.Header.GetClusterId(), members(resp.Members), nil
}

func (c *client) LocalMemberList(ctx context.Context) (uint64, []Member, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return 0, nil, fmt.Errorf("list members (serializable): %w", err)
	}
	return resp.Header.GetClusterId(), members(resp.Members), nil
}

func (c *client) AddLearner(ctx context.Context, peerURLs []string) (Member, []Member, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.MemberAddAsLearner(ctx, peerURLs)
	if err != nil {
		return Member{}, nil, fmt.Errorf("add learner %v: %w", peerURLs, classify(err))
	}
	return member(resp.Member), members(resp.Members), nil
}

func (c *client) AddVoter(ctx context.Context, peerURLs []string) (Member, []Member, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.MemberAdd(ctx, peerURLs)
	if err != nil {
		return Member{}, nil, fmt.Errorf("add voting member %v: %w", peerURLs, classify(err))
	}
	return member(resp.Member), members(resp.Members), nil
}

// Promote is sent to the leader: only it knows whether the learner caught
// up, and a follower forwards the request to it over the peer port without
// the caller's identity when that is a client certificate (etcd 3.5.21
// drops a password's token too: etcd issue 20757). With authentication on,
// the leader refused the forwarded request until the call timed out
// ("request timed out"), and a promotion waited for the balancer to pick
// the leader's endpoint: 5 s per miss, 50 s for the four members of a
// rebuilt 5-member cluster in the e2e suite. When no endpoint knows a
// leader, any member is asked.
func (c *client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cluster := c.cli.Cluster
	if _, endpoint, err := c.leaderEndpoint(ctx); err == nil {
		if conn, err := c.endpointConn(endpoint); err == nil {
			cluster = clientv3.NewClusterFromClusterClient(pb.NewClusterClient(conn), c.cli)
		}
	}
	if _, err := cluster.MemberPromote(ctx, id); err != nil {
		return fmt.Errorf("promote member %s: %w", FormatID(id), classify(err))
	}
	return nil
}

func (c *client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if _, err := c.cli.MemberRemove(ctx, id); err != nil {
		return fmt.Errorf("remove member %s: %w", FormatID(id), classify(err))
	}
	return nil
}

// Status asks the endpoint alone, over a connection of its own
// (endpointConn).
func (c *client) Status(ctx context.Context, endpoint string) (Status, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.status(ctx, endpoint)
}

func (c *client) status(ctx context.Context, endpoint string) (Status, error) {
	conn, err := c.connectedConn(ctx, endpoint)
	if err != nil {
		return Status{}, err
	}
	return statusOn(ctx, conn, endpoint)
}

// connectedConn is the endpoint's connection (endpointConn) once it is
// made or has failed, waiting up to connectWait for it (statusOn says
// why). A connection not made by then is closed, and the next call dials
// again: the client outlives the pass (Pool), and a connection still
// being made to the address a restarting member's Pod had kept the
// member unreachable to every later pass until gRPC gave it up, 20 s on
// (a roll's last member, Ready 25 s before the cluster was: make bench).
func (c *client) connectedConn(ctx context.Context, endpoint string) (*grpc.ClientConn, error) {
	conn, err := c.endpointConn(endpoint)
	if err != nil {
		return nil, err
	}
	if err := awaitConnection(ctx, conn, c.connectWait); err != nil {
		c.dropConn(endpoint, conn)
		return nil, fmt.Errorf("status of endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// statusOn asks for the status of the member at the other end of conn, and
// fails fast: an endpoint whose name does not resolve or that refuses
// connections (a member whose Pod is being deleted, or restarting) answers
// at once, not after the call timeout. clientv3's Maintenance waits for a
// connection until the deadline (its calls are WaitForReady), and a pass probing a member whose Pod had just gone
// took 5 s more each time (measured by the bench's recovery phases: 8.9 s
// from the old Pod gone to its new Pod created, before this).
//
// A fail-fast call still waits while the connection is being made, and a
// member whose etcd has started but not yet joined its cluster (it
// publishes its name through raft first, which etcd retries only after 7
// s when the first try is lost) listens on its client port without
// serving it: the connection is made and its handshake never answered.
// A pass that probed such a learner waited for it (7 s of the promotion of
// half the members a rebuilt 5-member cluster added). So the connection
// gets connectWait (Config.ConnectWait) to be made before the member is
// reported as not answering (connectedConn); conn is one that was.
func statusOn(ctx context.Context, conn *grpc.ClientConn, endpoint string) (Status, error) {
	resp, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return Status{}, fmt.Errorf("status of endpoint %s: %w", endpoint, err)
	}
	return Status{
		Endpoint:         endpoint,
		MemberID:         resp.Header.GetMemberId(),
		ClusterID:        resp.Header.GetClusterId(),
		Leader:           resp.Leader,
		Version:          resp.Version,
		DBSize:           resp.DbSize,
		DBSizeInUse:      resp.DbSizeInUse,
		RaftTerm:         resp.RaftTerm,
		RaftIndex:        resp.RaftIndex,
		RaftAppliedIndex: resp.RaftAppliedIndex,
		IsLearner:        resp.IsLearner,
		Errors:           resp.Errors,
	}, nil
}

// awaitConnection waits up to wait for conn to be ready. A connection that
// failed is left to the fail-fast call, which reports why.
func awaitConnection(ctx context.Context, conn *grpc.ClientConn, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn.Connect()
	for {
		switch state := conn.GetState(); state {
		case connectivity.Ready, connectivity.TransientFailure, connectivity.Shutdown:
			return nil
		default:
			if !conn.WaitForStateChange(ctx, state) {
				return fmt.Errorf("no connection within %s (%s): the member does not serve its client port yet", wait, state)
			}
		}
	}
}

// Health first asks the endpoint for its status: a learner refuses
// linearizable reads, and when the client has more than one endpoint
// clientv3 retries that refusal (hoping for a voter) up to 100 times against
// the same learner, about 1.3s, before returning it. So the learner case must
// be known before reading. The status also answers "does it know a leader"
// at once, and fails fast when nothing serves the endpoint (statusOn).
func (c *client) Health(ctx context.Context, endpoint string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	conn, err := c.connectedConn(ctx, endpoint)
	if err != nil {
		return err
	}
	st, err := statusOn(ctx, conn, endpoint)
	if err != nil {
		return err
	}
	if st.Leader == 0 {
		return fmt.Errorf("endpoint %s (member %s) has no leader", endpoint, FormatID(st.MemberID))
	}
	var opts []clientv3.OpOption
	if st.IsLearner {
		opts = append(opts, clientv3.WithSerializable())
	}
	kv := clientv3.NewKVFromKVClient(pb.NewKVClient(conn), c.cli)
	// WithRequireLeader makes a member that lost its leader since the status
	// answer refuse at once instead of waiting for a read index.
	_, err = kv.Get(clientv3.WithRequireLeader(ctx), healthKey, opts...)
	if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
		// A user without read access to the key still got an answer that
		// needed quorum; etcdctl endpoint health counts that as healthy.
		return fmt.Errorf("read from endpoint %s (member %s): %w", endpoint, FormatID(st.MemberID), err)
	}
	return nil
}

// MoveLeader must be sent to the leader (others answer "not leader"), so it
// first finds which endpoint serves the leader.
func (c *client) MoveLeader(ctx context.Context, to uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	leader, endpoint, err := c.leaderEndpoint(ctx)
	if err != nil {
		return fmt.Errorf("move leadership to member %s: %w", FormatID(to), err)
	}
	if leader == to {
		return nil
	}
	conn, err := c.endpointConn(endpoint)
	if err != nil {
		return err
	}
	m := clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(conn), c.cli)
	if _, err := m.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leadership from member %s (endpoint %s) to member %s: %w",
			FormatID(leader), endpoint, FormatID(to), classify(err))
	}
	return nil
}

// leaderEndpoint asks every configured endpoint for its status at once and
// returns the first one served by the leader. When none is (the leader's
// endpoint is not configured), it falls back to the leader's advertised
// client URL from the member list.
func (c *client) leaderEndpoint(ctx context.Context) (uint64, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the status calls still running
	endpoints := c.cli.Endpoints()
	type result struct {
		st  Status
		err error
	}
	results := make(chan result, len(endpoints))
	for _, ep := range endpoints {
		go func() {
			st, err := c.status(ctx, ep)
			results <- result{st, err}
		}()
	}
	var leader uint64
	var errs []error
	for range endpoints {
		r := <-results
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.st.Leader != 0 && r.st.Leader == r.st.MemberID:
			return r.st.Leader, r.st.Endpoint, nil
		case r.st.Leader != 0:
			leader = r.st.Leader
		}
	}
	if leader == 0 {
		return 0, "", fmt.Errorf("no endpoint knows a leader: %w", errors.Join(errs...))
	}
	_, ms, err := c.MemberList(ctx)
	if err != nil {
		return 0, "", err
	}
	for _, m := range ms {
		if m.ID == leader && len(m.ClientURLs) > 0 {
			return leader, m.ClientURLs[0], nil
		}
	}
	return 0, "", fmt.Errorf("leader %s advertises no client URL", FormatID(leader))
}

// endpointConn returns the client's connection to endpoint alone, dialled
// on first use and kept until Close: a cluster probed every few seconds is
// not dialled again on every probe. clientv3's Client.Dial pins the
// connection to that one address (its own resolver, not the client's
// balancer, which would pick any member) and reuses the client's TLS
// settings, retry interceptors and auth token. A short-lived
// clientv3.Client per endpoint would do the same, but with auth on it would
// authenticate on every call: a raft proposal and a bcrypt check on the
// server for each health probe.
//
// A kept connection that failed to connect is dialled again: gRPC would
// wait out its reconnect back-off (up to two minutes), and the fail-fast
// calls (statusOn) would report a member that is back as not answering
// all that time. One still being made after connectWait is dropped by
// connectedConn.
func (c *client) endpointConn(endpoint string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn := c.conns[endpoint]; conn != nil {
		switch conn.GetState() {
		case connectivity.TransientFailure, connectivity.Shutdown:
			_ = conn.Close()
			delete(c.conns, endpoint)
		default:
			return conn, nil
		}
	}
	if c.conns == nil {
		return nil, fmt.Errorf("dial endpoint %s: the client is closed", endpoint)
	}
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return nil, fmt.Errorf("dial endpoint %s: %w", endpoint, err)
	}
	c.conns[endpoint] = conn
	return conn, nil
}

// dropConn closes conn and forgets it, unless the endpoint has another
// connection by now.
func (c *client) dropConn(endpoint string, conn *grpc.ClientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[endpoint] == conn {
		delete(c.conns, endpoint)
	}
	_ = conn.Close()
}

func (c *client) Alarms(ctx context.Context) ([]Alarm, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list alarms: %w", err)
	}
	alarms := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		alarms = append(alarms, Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	return alarms, nil
}

func (c *client) DisarmAlarm(ctx context.Context, a Alarm) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	alarm, ok := pb.AlarmType_value[a.Type]
	if !ok {
		return fmt.Errorf("disarm alarm: unknown alarm type %q", a.Type)
	}
	_, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: pb.AlarmType(alarm)})
	if err != nil {
		return fmt.Errorf("disarm alarm %s of member %s: %w", a.Type, FormatID(a.MemberID), err)
	}
	return nil
}

func (c *client) Compact(ctx context.Context) (int64, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// A Get of any key returns the store's current revision in its header.
	resp, err := c.cli.Get(ctx, healthKey)
	if err != nil {
		return 0, fmt.Errorf("compact: reading the current revision: %w", err)
	}
	rev := resp.Header.GetRevision()
	if _, err := c.cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return rev, fmt.Errorf("compact to revision %d: %w", rev, ErrAlreadyCompacted)
	} else if err != nil {
		return 0, fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	return rev, nil
}

// Defragment may take long on a large database: it is bounded by the
// caller's context, not the client's call timeout.
func (c *client) Defragment(ctx context.Context, endpoint string) error {
	if _, err := c.cli.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment endpoint %s: %w", endpoint, err)
	}
	return nil
}

func (c *client) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// A Get of any key returns the store's current revision in its header.
	resp, err := c.cli.Get(ctx, healthKey)
	if err != nil {
		return 0, fmt.Errorf("reading the current revision: %w", err)
	}
	return resp.Header.GetRevision(), nil
}

// Snapshot reads the stream over a client of the endpoint alone, so the
// member asked for serves the snapshot and, on a cluster with a password,
// issues the token the stream carries too. A token that another member
// issued reaches this one through raft, and a follower that has not
// applied it yet refuses the stream: CI once saw both followers answer
// "invalid auth token" at a load average of 15, and clientv3 refreshes a
// token over its balanced connection, which may pick that other member
// again. A member answers an authentication only once it has applied it.
func (c *client) Snapshot(ctx context.Context, endpoint string, w io.Writer) (string, error) {
	cfg := c.cfg
	cfg.Endpoints = []string{endpoint}
	cfg.Context = ctx
	one, err := clientv3.New(cfg)
	if err != nil {
		return "", fmt.Errorf("snapshot of endpoint %s: connect: %w", endpoint, err)
	}
	defer func() { _ = one.Close() }()
	resp, err := one.SnapshotWithVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("snapshot of endpoint %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Snapshot.Close() }()
	if _, err := io.Copy(w, resp.Snapshot); err != nil {
		return "", fmt.Errorf("snapshot of endpoint %s: %w", endpoint, err)
	}
	return resp.Version, nil
}

func (c *client) AuthEnabled(ctx context.Context) (bool, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.AuthStatus(ctx)
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty):
		return true, nil // only a cluster with auth on asks who is calling
	case err != nil:
		return false, fmt.Errorf("auth status: %w", err)
	}
	return resp.Enabled, nil
}

// RootUser is the user etcd requires before it turns authentication on.
const RootUser = "root"

func (c *client) EnableAuth(ctx context.Context, rootPassword string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := c.ensureUser(ctx, RootUser, rootPassword); err != nil {
		return err
	}
	if _, err := c.cli.UserGrantRole(ctx, RootUser, RootUser); err != nil {
		return fmt.Errorf("grant role root to user root: %w", err)
	}
	if _, err := c.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable auth: %w", err)
	}
	return nil
}

func (c *client) DisableAuth(ctx context.Context) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if _, err := c.cli.AuthDisable(ctx); err != nil {
		return fmt.Errorf("disable auth: %w", err)
	}
	return nil
}

// Tenant is an etcd user confined to a key prefix by a role of its own.
type Tenant struct {
	// User names both the user and its role.
	User string
	// Prefix is the start of every key the user may read and write.
	Prefix string
	// Password is the user's password; empty for a user that
	// authenticates only by the CN of its client certificate.
	Password string
}

func (c *client) EnsureTenant(ctx context.Context, t Tenant) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if _, err := c.cli.RoleAdd(ctx, t.User); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("add role %s: %w", t.User, err)
	}
	role, err := c.cli.RoleGet(ctx, t.User)
	if err != nil {
		return fmt.Errorf("get role %s: %w", t.User, err)
	}
	end := clientv3.GetPrefixRangeEnd(t.Prefix)
	granted := false
	for _, p := range role.Perm {
		if string(p.Key) == t.Prefix && string(p.RangeEnd) == end && p.PermType == clientv3.PermReadWrite {
			granted = true
			continue
		}
		if _, err := c.cli.RoleRevokePermission(ctx, t.User, string(p.Key), string(p.RangeEnd)); err != nil {
			return fmt.Errorf("revoke [%q, %q) from role %s: %w", p.Key, p.RangeEnd, t.User, err)
		}
	}
	if !granted {
		if _, err := c.cli.RoleGrantPermission(ctx, t.User, t.Prefix, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			return fmt.Errorf("grant read-write on %s to role %s: %w", t.Prefix, t.User, err)
		}
	}
	if err := c.ensureUser(ctx, t.User, t.Password); err != nil {
		return err
	}
	user, err := c.cli.UserGet(ctx, t.User)
	if err != nil {
		return fmt.Errorf("get user %s: %w", t.User, err)
	}
	has := false
	for _, r := range user.Roles {
		if r == t.User {
			has = true
			continue
		}
		if _, err := c.cli.UserRevokeRole(ctx, t.User, r); err != nil {
			return fmt.Errorf("revoke role %s from user %s: %w", r, t.User, err)
		}
	}
	if !has {
		if _, err := c.cli.UserGrantRole(ctx, t.User, t.User); err != nil {
			return fmt.Errorf("grant role %s to user %s: %w", t.User, t.User, err)
		}
	}
	return nil
}

// ensureUser adds user, with password or none, or makes an existing
// user's password password: etcd keeps only a hash, so the password is
// checked by authenticating with it, and changed when that fails.
func (c *client) ensureUser(ctx context.Context, user, password string) error {
	opts := &clientv3.UserAddOptions{NoPassword: password == ""}
	_, err := c.cli.UserAddWithOptions(ctx, user, password, opts)
	switch {
	case err == nil || password == "" && errors.Is(rpctypes.Error(err), rpctypes.ErrUserAlreadyExist):
		return nil
	case !errors.Is(rpctypes.Error(err), rpctypes.ErrUserAlreadyExist):
		return fmt.Errorf("add user %s: %w", user, err)
	}
	if _, err := c.cli.Authenticate(ctx, user, password); err == nil {
		return nil
	} else if !errors.Is(rpctypes.Error(err), rpctypes.ErrAuthFailed) && !errors.Is(rpctypes.Error(err), rpctypes.ErrAuthNotEnabled) {
		return fmt.Errorf("check the password of user %s: %w", user, err)
	}
	if _, err := c.cli.UserChangePassword(ctx, user, password); err != nil {
		return fmt.Errorf("set the password of user %s: %w", user, err)
	}
	return nil
}

func (c *client) RemoveTenant(ctx context.Context, user string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if _, err := c.cli.UserDelete(ctx, user); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrUserNotFound) {
		return fmt.Errorf("delete user %s: %w", user, err)
	}
	if _, err := c.cli.RoleDelete(ctx, user); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("delete role %s: %w", user, err)
	}
	return nil
}

func (c *client) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.cli.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("delete the keys under %s: %w", prefix, err)
	}
	return resp.Deleted, nil
}

func (c *client) Close() error {
	c.mu.Lock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
	c.mu.Unlock()
	return c.cli.Close()
}

// classify wraps the etcd errors callers act on in this package's sentinels,
// keeping etcd's message.
func classify(err error) error {
	switch etcdErr := rpctypes.Error(err); {
	case errors.Is(etcdErr, rpctypes.ErrMemberLearnerNotReady):
		return fmt.Errorf("%w (%w)", ErrLearnerNotReady, err)
	case errors.Is(etcdErr, rpctypes.ErrMemberNotFound):
		return fmt.Errorf("%w (%w)", ErrMemberNotFound, err)
	case errors.Is(etcdErr, rpctypes.ErrUnhealthy):
		return fmt.Errorf("%w (%w)", ErrUnhealthyCluster, err)
	}
	return err
}

func member(m *pb.Member) Member {
	return Member{
		ID:         m.GetID(),
		Name:       m.GetName(),
		PeerURLs:   m.GetPeerURLs(),
		ClientURLs: m.GetClientURLs(),
		IsLearner:  m.GetIsLearner(),
	}
}

func members(ms []*pb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, member(m))
	}
	return out
}
