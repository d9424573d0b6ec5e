// Package fake is an in-memory etcd.Client for reconciler unit tests. It
// keeps a member list, a leader, learners that are or are not caught up,
// alarms and per-endpoint health, refuses what etcd refuses (promoting a
// learner that has not caught up, a second learner, a duplicate peer URL),
// lets a test inject errors per method and records every call.
//
//	c := fake.New(
//		etcd.Member{ID: 1, Name: "etcd-0", ClientURLs: []string{"http://etcd-0:2379"}},
//		etcd.Member{ID: 2, Name: "etcd-1", ClientURLs: []string{"http://etcd-1:2379"}},
//	).WithUnhealthy("http://etcd-1:2379", errors.New("context deadline exceeded"))
//
// The first voting member is the leader unless WithLeader says otherwise.
package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// Method names an etcd.Client method, for error injection and assertions.
type Method string

// The methods of etcd.Client.
const (
	MemberList Method = "MemberList"
	LocalList  Method = "LocalMemberList"
	AddLearner Method = "AddLearner"
	AddVoter   Method = "AddVoter"
	Promote    Method = "Promote"
	Remove     Method = "Remove"
	Status     Method = "Status"
	MoveLeader Method = "MoveLeader"
	Health     Method = "Health"
	Alarms     Method = "Alarms"
	Disarm     Method = "DisarmAlarm"
	Compact    Method = "Compact"
	Defragment Method = "Defragment"
	AuthStatus Method = "AuthEnabled"
	AuthOn     Method = "EnableAuth"
	AuthOff    Method = "DisableAuth"
	EnsureTen  Method = "EnsureTenant"
	RemoveTen  Method = "RemoveTenant"
	DelPrefix  Method = "DeletePrefix"
	Snapshot   Method = "Snapshot"
	Revision   Method = "Revision"
	Close      Method = "Close"
)

// Call is one recorded call. Only the fields the method takes are set.
type Call struct {
	Method Method
	// ID is the member argument of Promote, Remove and MoveLeader.
	ID uint64
	// PeerURLs is the argument of AddLearner and AddVoter.
	PeerURLs []string
	// Endpoint is the argument of Status, Health, Defragment and Snapshot.
	Endpoint string
	// Alarm is the argument of DisarmAlarm.
	Alarm etcd.Alarm
}

// DefaultClusterID and DefaultVersion are what a new fake reports.
const (
	DefaultClusterID uint64 = 0xc1
	DefaultVersion          = "3.6.16"
)

// Client is the fake. Its zero value is not usable; call New.
type Client struct {
	mu        sync.Mutex
	clusterID uint64
	version   string
	members   []etcd.Member
	leader    uint64
	lagging   map[uint64]bool
	statuses  map[string]etcd.Status
	unhealthy map[string]error
	alarms    []etcd.Alarm
	failures  map[Method]error
	failOnce  map[Method][]error
	calls     []Call
	closed    bool
	auth      bool
	rootPass  string
	tenants   map[string]etcd.Tenant
	keys      map[string]string
	// compacted is set by Compact: the fake's revision never moves, so a
	// second compaction finds nothing to drop.
	compacted bool
	// snapshot is what Snapshot streams (WithSnapshot).
	snapshot []byte
	// revision is what Revision returns (WithRevision).
	revision int64
}

var _ etcd.Client = (*Client)(nil)

// New returns a fake cluster with members; the first voter leads.
func New(members ...etcd.Member) *Client {
	c := &Client{
		clusterID: DefaultClusterID,
		version:   DefaultVersion,
		lagging:   map[uint64]bool{},
		statuses:  map[string]etcd.Status{},
		unhealthy: map[string]error{},
		failures:  map[Method]error{},
		failOnce:  map[Method][]error{},
		tenants:   map[string]etcd.Tenant{},
		keys:      map[string]string{},
	}
	for _, m := range members {
		c.members = append(c.members, clone(m))
	}
	c.electLocked()
	return c
}

// WithClusterID sets the cluster ID the fake reports.
func (c *Client) WithClusterID(id uint64) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterID = id
	return c
}

// WithVersion sets the server version every member reports.
func (c *Client) WithVersion(v string) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version = v
	return c
}

// WithLeader makes member id the leader (0: no leader).
func (c *Client) WithLeader(id uint64) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = id
	return c
}

// WithLaggingLearner makes Promote of learner id fail with
// etcd.ErrLearnerNotReady until SetCaughtUp(id). Learners added through
// AddLearner start lagging.
func (c *Client) WithLaggingLearner(id uint64) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lagging[id] = true
	return c
}

// SetCaughtUp lets learner id be promoted.
func (c *Client) SetCaughtUp(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lagging, id)
}

// WithStatus makes Status(s.Endpoint) return s instead of the status derived
// from the member list.
func (c *Client) WithStatus(s etcd.Status) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statuses[s.Endpoint] = s
	return c
}

// WithUnhealthy makes Health(endpoint) return err; a nil err makes it
// healthy again.
func (c *Client) WithUnhealthy(endpoint string, err error) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.unhealthy, endpoint)
	} else {
		c.unhealthy[endpoint] = err
	}
	return c
}

// WithAlarm raises an alarm.
func (c *Client) WithAlarm(a etcd.Alarm) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alarms = append(c.alarms, a)
	return c
}

// Fail makes every call of method return err, until Fail(method, nil).
func (c *Client) Fail(method Method, err error) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.failures, method)
	} else {
		c.failures[method] = err
	}
	return c
}

// FailOnce makes the next call of method return err; several FailOnce
// calls queue up. One-shot errors come before a Fail error.
func (c *Client) FailOnce(method Method, err error) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failOnce[method] = append(c.failOnce[method], err)
	return c
}

// Members returns a copy of the current member list.
func (c *Client) Members() []etcd.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneAll(c.members)
}

// Leader returns the current leader's ID.
func (c *Client) Leader() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Calls returns the calls made so far, oldest first.
func (c *Client) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// CallsOf returns the calls of method made so far, oldest first.
func (c *Client) CallsOf(method Method) []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Call
	for _, call := range c.calls {
		if call.Method == method {
			out = append(out, call)
		}
	}
	return out
}

// Closed reports whether Close was called.
func (c *Client) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// begin records call and returns the error the call must fail with, if
// any. The caller holds c.mu.
func (c *Client) begin(ctx context.Context, call Call) error {
	c.calls = append(c.calls, call)
	if c.closed && call.Method != Close {
		return fmt.Errorf("%s: client is closed", call.Method)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if q := c.failOnce[call.Method]; len(q) > 0 {
		c.failOnce[call.Method] = q[1:]
		return q[0]
	}
	return c.failures[call.Method]
}

// MemberList implements etcd.Client.
func (c *Client) MemberList(ctx context.Context) (uint64, []etcd.Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: MemberList}); err != nil {
		return 0, nil, err
	}
	return c.clusterID, cloneAll(c.members), nil
}

// LocalMemberList implements etcd.Client: the fake's one member list,
// failing only as LocalList is told to (so a test can take the quorum
// away from MemberList alone).
func (c *Client) LocalMemberList(ctx context.Context) (uint64, []etcd.Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: LocalList}); err != nil {
		return 0, nil, err
	}
	return c.clusterID, cloneAll(c.members), nil
}

// AddLearner implements etcd.Client. The new learner is lagging until
// SetCaughtUp. Like etcd (--max-learners=1), it refuses a second learner.
func (c *Client) AddLearner(ctx context.Context, peerURLs []string) (etcd.Member, []etcd.Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: AddLearner, PeerURLs: slices.Clone(peerURLs)}); err != nil {
		return etcd.Member{}, nil, err
	}
	if slices.ContainsFunc(c.members, func(m etcd.Member) bool { return m.IsLearner }) {
		return etcd.Member{}, nil, fmt.Errorf("add learner %v: etcdserver: too many learner members in cluster", peerURLs)
	}
	m, err := c.addLocked(peerURLs, true)
	if err != nil {
		return etcd.Member{}, nil, fmt.Errorf("add learner %v: %w", peerURLs, err)
	}
	c.lagging[m.ID] = true
	return m, cloneAll(c.members), nil
}

// AddVoter implements etcd.Client.
func (c *Client) AddVoter(ctx context.Context, peerURLs []string) (etcd.Member, []etcd.Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: AddVoter, PeerURLs: slices.Clone(peerURLs)}); err != nil {
		return etcd.Member{}, nil, err
	}
	m, err := c.addLocked(peerURLs, false)
	if err != nil {
		return etcd.Member{}, nil, fmt.Errorf("add voting member %v: %w", peerURLs, err)
	}
	if c.leader == 0 {
		c.electLocked()
	}
	return m, cloneAll(c.members), nil
}

func (c *Client) addLocked(peerURLs []string, learner bool) (etcd.Member, error) {
	if len(peerURLs) == 0 {
		return etcd.Member{}, errors.New("no peer URLs")
	}
	for _, m := range c.members {
		for _, u := range peerURLs {
			if slices.Contains(m.PeerURLs, u) {
				return etcd.Member{}, errors.New("etcdserver: Peer URLs already exists")
			}
		}
	}
	var id uint64 = 1
	for _, m := range c.members {
		id = max(id, m.ID+1)
	}
	m := etcd.Member{ID: id, PeerURLs: slices.Clone(peerURLs), IsLearner: learner}
	c.members = append(c.members, m)
	return clone(m), nil
}

// Promote implements etcd.Client.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Promote, ID: id}); err != nil {
		return err
	}
	i := c.indexLocked(id)
	switch {
	case i < 0:
		return fmt.Errorf("promote member %s: %w", etcd.FormatID(id), etcd.ErrMemberNotFound)
	case !c.members[i].IsLearner:
		return fmt.Errorf("promote member %s: etcdserver: can only promote a learner member", etcd.FormatID(id))
	case c.lagging[id]:
		return fmt.Errorf("promote member %s: %w", etcd.FormatID(id), etcd.ErrLearnerNotReady)
	}
	c.members[i].IsLearner = false
	return nil
}

// Remove implements etcd.Client. Removing the leader elects the first
// remaining voter.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Remove, ID: id}); err != nil {
		return err
	}
	i := c.indexLocked(id)
	if i < 0 {
		return fmt.Errorf("remove member %s: %w", etcd.FormatID(id), etcd.ErrMemberNotFound)
	}
	c.members = slices.Delete(c.members, i, i+1)
	delete(c.lagging, id)
	if c.leader == id {
		c.electLocked()
	}
	return nil
}

// Status implements etcd.Client. Unless WithStatus set one, the status is
// derived from the member whose ClientURLs hold endpoint; an endpoint no
// member serves fails as an unreachable one would.
func (c *Client) Status(ctx context.Context, endpoint string) (etcd.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Status, Endpoint: endpoint}); err != nil {
		return etcd.Status{}, err
	}
	return c.statusLocked(endpoint)
}

// alarmErrorsLocked are the alarms as every member's status lists them,
// the way etcd prints its AlarmMember.
func (c *Client) alarmErrorsLocked() []string {
	var errs []string
	for _, a := range c.alarms {
		errs = append(errs, fmt.Sprintf("memberID:%d alarm:%s ", a.MemberID, a.Type))
	}
	return errs
}

func (c *Client) statusLocked(endpoint string) (etcd.Status, error) {
	if s, ok := c.statuses[endpoint]; ok {
		s.Errors = append(slices.Clone(s.Errors), c.alarmErrorsLocked()...)
		return s, nil
	}
	for _, m := range c.members {
		if slices.Contains(m.ClientURLs, endpoint) {
			st := etcd.Status{
				Endpoint:  endpoint,
				MemberID:  m.ID,
				ClusterID: c.clusterID,
				Leader:    c.leader,
				Version:   c.version,
				IsLearner: m.IsLearner,
			}
			st.Errors = c.alarmErrorsLocked()
			return st, nil
		}
	}
	return etcd.Status{}, fmt.Errorf("status of endpoint %s: %w", endpoint, context.DeadlineExceeded)
}

// MoveLeader implements etcd.Client.
func (c *Client) MoveLeader(ctx context.Context, to uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: MoveLeader, ID: to}); err != nil {
		return err
	}
	if c.leader == 0 {
		return fmt.Errorf("move leadership to member %s: no endpoint knows a leader", etcd.FormatID(to))
	}
	i := c.indexLocked(to)
	if i < 0 || c.members[i].IsLearner {
		return fmt.Errorf("move leadership to member %s: etcdserver: bad leader transferee", etcd.FormatID(to))
	}
	c.leader = to
	return nil
}

// Health implements etcd.Client: the WithUnhealthy error, else the Status
// error, else healthy when a leader is known.
func (c *Client) Health(ctx context.Context, endpoint string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Health, Endpoint: endpoint}); err != nil {
		return err
	}
	if err := c.unhealthy[endpoint]; err != nil {
		return err
	}
	s, err := c.statusLocked(endpoint)
	if err != nil {
		return err
	}
	if s.Leader == 0 {
		return fmt.Errorf("endpoint %s (member %s) has no leader", endpoint, etcd.FormatID(s.MemberID))
	}
	return nil
}

// Alarms implements etcd.Client.
func (c *Client) Alarms(ctx context.Context) ([]etcd.Alarm, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Alarms}); err != nil {
		return nil, err
	}
	return slices.Clone(c.alarms), nil
}

// DisarmAlarm implements etcd.Client: the alarm is gone.
func (c *Client) DisarmAlarm(ctx context.Context, a etcd.Alarm) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Disarm, Alarm: a}); err != nil {
		return err
	}
	c.alarms = slices.DeleteFunc(c.alarms, func(b etcd.Alarm) bool { return b == a })
	return nil
}

// Compact implements etcd.Client: it records the call and returns revision
// 1, and etcd.ErrAlreadyCompacted from the second call on.
func (c *Client) Compact(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Compact}); err != nil {
		return 0, err
	}
	if c.compacted {
		return 1, etcd.ErrAlreadyCompacted
	}
	c.compacted = true
	return 1, nil
}

// Defragment implements etcd.Client: the endpoint's status, when set with
// WithStatus, has no free space left.
func (c *Client) Defragment(ctx context.Context, endpoint string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Defragment, Endpoint: endpoint}); err != nil {
		return err
	}
	if s, ok := c.statuses[endpoint]; ok {
		s.DBSize = s.DBSizeInUse
		c.statuses[endpoint] = s
	}
	return nil
}

// AuthEnabled implements etcd.Client.
func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: AuthStatus}); err != nil {
		return false, err
	}
	return c.auth, nil
}

// EnableAuth implements etcd.Client.
func (c *Client) EnableAuth(ctx context.Context, rootPassword string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: AuthOn}); err != nil {
		return err
	}
	c.auth, c.rootPass = true, rootPassword
	return nil
}

// RootPassword is root's password as EnableAuth last set it.
func (c *Client) RootPassword() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rootPass
}

// EnsureTenant implements etcd.Client.
func (c *Client) EnsureTenant(ctx context.Context, t etcd.Tenant) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: EnsureTen}); err != nil {
		return err
	}
	c.tenants[t.User] = t
	return nil
}

// RemoveTenant implements etcd.Client.
func (c *Client) RemoveTenant(ctx context.Context, user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: RemoveTen}); err != nil {
		return err
	}
	delete(c.tenants, user)
	return nil
}

// DeletePrefix implements etcd.Client.
func (c *Client) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: DelPrefix}); err != nil {
		return 0, err
	}
	var n int64
	for k := range c.keys {
		if strings.HasPrefix(k, prefix) {
			delete(c.keys, k)
			n++
		}
	}
	return n, nil
}

// WithRevision sets the cluster's current revision.
func (c *Client) WithRevision(rev int64) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revision = rev
	return c
}

// Revision returns the revision set by WithRevision.
func (c *Client) Revision(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: Revision}); err != nil {
		return 0, err
	}
	return c.revision, nil
}

// WithSnapshot sets the bytes Snapshot streams from every endpoint.
func (c *Client) WithSnapshot(data []byte) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snapshot = append([]byte(nil), data...)
	return c
}

// Snapshot writes the bytes set by WithSnapshot, from an endpoint that is
// healthy (WithUnhealthy makes it fail as Status does).
func (c *Client) Snapshot(ctx context.Context, endpoint string, w io.Writer) (string, error) {
	c.mu.Lock()
	if err := c.begin(ctx, Call{Method: Snapshot, Endpoint: endpoint}); err != nil {
		c.mu.Unlock()
		return "", err
	}
	if err := c.unhealthy[endpoint]; err != nil {
		c.mu.Unlock()
		return "", err
	}
	data, version := c.snapshot, c.version
	c.mu.Unlock()
	if _, err := w.Write(data); err != nil {
		return "", err
	}
	// The stream reports the storage format's version from 3.6 on.
	if strings.HasPrefix(version, "3.5.") {
		return "", nil
	}
	return version[:strings.LastIndex(version, ".")] + ".0", nil
}

// Tenants are the tenants etcd holds, by user.
func (c *Client) Tenants() map[string]etcd.Tenant {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.tenants)
}

// Put stores a key, for tests of DeletePrefix.
func (c *Client) Put(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[key] = value
}

// Keys are the stored keys.
func (c *Client) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.keys))
}

// DisableAuth implements etcd.Client.
func (c *Client) DisableAuth(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx, Call{Method: AuthOff}); err != nil {
		return err
	}
	c.auth = false
	return nil
}

// Close implements etcd.Client.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(context.Background(), Call{Method: Close}); err != nil {
		return err
	}
	c.closed = true
	return nil
}

func (c *Client) indexLocked(id uint64) int {
	return slices.IndexFunc(c.members, func(m etcd.Member) bool { return m.ID == id })
}

// electLocked makes the first voter the leader (0 when there is none).
func (c *Client) electLocked() {
	c.leader = 0
	if i := slices.IndexFunc(c.members, func(m etcd.Member) bool { return !m.IsLearner }); i >= 0 {
		c.leader = c.members[i].ID
	}
}

func clone(m etcd.Member) etcd.Member {
	m.PeerURLs = slices.Clone(m.PeerURLs)
	m.ClientURLs = slices.Clone(m.ClientURLs)
	return m
}

func cloneAll(ms []etcd.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, clone(m))
	}
	return out
}
