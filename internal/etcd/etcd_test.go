package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// These tests run the Client against real etcd servers: the binaries the
// local cluster uses, started as plain processes on 127.0.0.1.

// versions are the etcd servers the client is tested against.
var versions = []string{"v3.6.16", "v3.5.21"}

const (
	// callTimeout is the Client's CallTimeout in these tests.
	callTimeout = 2 * time.Second
	// waitTimeout bounds every wait for a cluster to reach a state.
	waitTimeout = 20 * time.Second
)

func TestLearnerLifecycle(t *testing.T) {
	t.Parallel()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc := startCluster(t, version, 1)
			cli := tc.client(t)
			first := tc.members[0]

			clusterID, ms, err := cli.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if clusterID == 0 || len(ms) != 1 || ms[0].Name != first.name || ms[0].IsLearner ||
				!slices.Equal(ms[0].ClientURLs, []string{first.clientURL}) || !slices.Equal(ms[0].PeerURLs, []string{first.peerURL}) {
				t.Fatalf("MemberList = %x, %+v; want one voter %s at %s", clusterID, ms, first.name, first.clientURL)
			}

			st, err := cli.Status(ctx, first.clientURL)
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != strings.TrimPrefix(version, "v") || st.MemberID != ms[0].ID || st.Leader != ms[0].ID ||
				st.ClusterID != clusterID || st.IsLearner || st.Endpoint != first.clientURL || st.DBSize == 0 || st.RaftIndex == 0 {
				t.Errorf("Status = %+v; want version %s, member and leader %s", st, version, etcd.FormatID(ms[0].ID))
			}
			if err := cli.Health(ctx, first.clientURL); err != nil {
				t.Errorf("Health of a live single member: %v", err)
			}
			if alarms, err := cli.Alarms(ctx); err != nil || len(alarms) != 0 {
				t.Errorf("Alarms = %v, %v; want none", alarms, err)
			}

			// Add a learner; etcd refuses to promote it before it has even started.
			peerURL, clientURL := localURL(t), localURL(t)
			learner, ms, err := cli.AddLearner(ctx, []string{peerURL})
			if err != nil {
				t.Fatal(err)
			}
			if !learner.IsLearner || learner.ID == 0 || learner.Name != "" || len(ms) != 2 {
				t.Fatalf("AddLearner = %+v, %d members; want an unnamed learner among 2", learner, len(ms))
			}
			err = cli.Promote(ctx, learner.ID)
			if !errors.Is(err, etcd.ErrLearnerNotReady) {
				t.Fatalf("Promote of a learner that has not started = %v; want ErrLearnerNotReady", err)
			}
			if !strings.Contains(err.Error(), etcd.FormatID(learner.ID)) {
				t.Errorf("Promote error %q does not name member %s", err, etcd.FormatID(learner.ID))
			}

			// Start it, see it report itself as a learner, promote it once caught up.
			second := tc.start(t, "m1", peerURL, clientURL, "existing",
				fmt.Sprintf("%s=%s,m1=%s", first.name, first.peerURL, peerURL))
			eventually(t, "the learner to report itself as a learner", func() error {
				st, err := cli.Status(ctx, second.clientURL)
				if err != nil {
					return err
				}
				if !st.IsLearner || st.MemberID != learner.ID || st.Leader != first.id {
					return fmt.Errorf("status %+v", st)
				}
				return nil
			}, second)
			eventually(t, "the learner to be healthy", func() error {
				return cli.Health(ctx, second.clientURL)
			}, second)
			notReady := 0
			eventually(t, "the learner to be promoted", func() error {
				err := cli.Promote(ctx, learner.ID)
				if errors.Is(err, etcd.ErrLearnerNotReady) {
					notReady++
				} else if err != nil {
					t.Fatalf("Promote: %v", err)
				}
				return err
			}, second)
			t.Logf("promoted after %d refusals as not ready", notReady)

			_, ms, err = cli.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(ms, func(m etcd.Member) bool { return m.ID == learner.ID }); i < 0 || ms[i].IsLearner || ms[i].Name != "m1" {
				t.Fatalf("after Promote, members = %+v; want m1 (%s) voting", ms, etcd.FormatID(learner.ID))
			}

			// etcd refuses to remove a voter until the leader has been
			// connected to the others for 5s; m1 has just joined.
			untilAccepted(t, "etcd to accept removing m1", func() error { return cli.Remove(ctx, learner.ID) })
			if _, ms, err = cli.MemberList(ctx); err != nil || len(ms) != 1 || ms[0].Name != first.name {
				t.Fatalf("after Remove, MemberList = %+v, %v; want %s alone", ms, err, first.name)
			}
			if err := cli.Remove(ctx, learner.ID); !errors.Is(err, etcd.ErrMemberNotFound) {
				t.Errorf("Remove of a removed member = %v; want ErrMemberNotFound", err)
			}
		})
	}
}

func TestThreeMembers(t *testing.T) {
	t.Parallel()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc := startCluster(t, version, 3)
			cli := tc.client(t)

			_, ms, err := cli.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 3 || slices.ContainsFunc(ms, func(m etcd.Member) bool { return m.IsLearner }) {
				t.Fatalf("MemberList = %+v; want 3 voters", ms)
			}

			leader := tc.leader(t, cli)
			var to *process
			for _, m := range tc.members {
				if m.id != leader.id {
					to = m
					break
				}
			}
			if err := cli.MoveLeader(ctx, to.id); err != nil {
				t.Fatal(err)
			}
			eventually(t, fmt.Sprintf("every member to follow the new leader %s", to.name), func() error {
				for _, m := range tc.members {
					st, err := cli.Status(ctx, m.clientURL)
					if err != nil {
						return err
					}
					if st.Leader != to.id {
						return fmt.Errorf("%s follows %s", m.name, etcd.FormatID(st.Leader))
					}
				}
				return nil
			})
			if err := cli.MoveLeader(ctx, to.id); err != nil {
				t.Errorf("MoveLeader to the current leader = %v; want nothing done", err)
			}

			// A voter that never starts: 4 voters, 3 up, still a quorum. etcd
			// refuses until the new leader has been connected to every peer
			// for 5s.
			var added etcd.Member
			peerURL := localURL(t)
			untilAccepted(t, "etcd to accept a new voting member", func() error {
				added, ms, err = cli.AddVoter(ctx, []string{peerURL})
				return err
			})
			if added.IsLearner || len(ms) != 4 {
				t.Fatalf("AddVoter = %+v, %d members; want a voter among 4", added, len(ms))
			}
			untilAccepted(t, "etcd to accept removing the new voter", func() error { return cli.Remove(ctx, added.ID) })

			if alarms, err := cli.Alarms(ctx); err != nil || len(alarms) != 0 {
				t.Errorf("Alarms = %v, %v; want none", alarms, err)
			}

			for _, m := range tc.members {
				if err := cli.Health(ctx, m.clientURL); err != nil {
					t.Errorf("Health of live member %s: %v", m.name, err)
				}
			}
			stopped := tc.members[0]
			if stopped.id == to.id {
				stopped = tc.members[1]
			}
			stopped.stop(t)
			start := time.Now()
			err = cli.Health(ctx, stopped.clientURL)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("Health of stopped member %s succeeded", stopped.name)
			}
			if !strings.Contains(err.Error(), stopped.clientURL) {
				t.Errorf("Health error %q does not name the endpoint %s", err, stopped.clientURL)
			}
			if took > callTimeout+time.Second {
				t.Errorf("Health of a stopped member took %s; want about the call timeout %s", took, callTimeout)
			}
			t.Logf("Health of stopped member: %v (after %s)", err, took.Round(time.Millisecond))
			for _, m := range tc.members {
				if m != stopped {
					if err := cli.Health(ctx, m.clientURL); err != nil {
						t.Errorf("Health of %s with one member of three stopped: %v", m.name, err)
					}
				}
			}
		})
	}
}

// process is one etcd server process.
type process struct {
	name, peerURL, clientURL string
	// id is the member ID, known once the cluster is up.
	id   uint64
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

type cluster struct {
	bin     string
	token   string
	members []*process
	// args are extra flags of every member.
	args []string
}

// TestNoSpaceRecovery fills a member's quota until etcd raises NOSPACE and
// refuses writes, then recovers as the health reconciler does: compact,
// defragment, disarm. Writes succeed again and the live keys are kept.
func TestNoSpaceRecovery(t *testing.T) {
	t.Parallel()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc := startCluster(t, version, 1, "--quota-backend-bytes=2097152")
			cli := tc.client(t)
			raw, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, DialTimeout: callTimeout, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = raw.Close() })
			if _, err := raw.Put(ctx, "/kept", "yes"); err != nil {
				t.Fatal(err)
			}
			value := strings.Repeat("x", 64<<10)
			var full error
			for i := 0; i < 200 && full == nil; i++ {
				// Overwriting one key keeps its old revisions until compaction.
				_, full = raw.Put(ctx, "/filler", value+fmt.Sprint(i))
			}
			if !errors.Is(full, rpctypes.ErrNoSpace) {
				t.Fatalf("writing past the quota: %v, want %v", full, rpctypes.ErrNoSpace)
			}
			alarms, err := cli.Alarms(ctx)
			if err != nil || len(alarms) != 1 || alarms[0].Type != etcd.AlarmNoSpace {
				t.Fatalf("Alarms() = %v, %v; want one NOSPACE", alarms, err)
			}
			before, err := cli.Status(ctx, tc.members[0].clientURL)
			if err != nil {
				t.Fatal(err)
			}

			if _, err := cli.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			compacted, err := cli.Status(ctx, tc.members[0].clientURL)
			if err != nil {
				t.Fatal(err)
			}
			// The pages compaction frees count as in use until bbolt's next
			// write transaction releases them, which may come after this
			// Status: the space compaction freed shows after defragmenting.
			t.Logf("after compaction: database %d bytes, %d in use", compacted.DBSize, compacted.DBSizeInUse)
			if err := cli.Defragment(ctx, tc.members[0].clientURL); err != nil {
				t.Fatal(err)
			}
			if err := cli.DisarmAlarm(ctx, alarms[0]); err != nil {
				t.Fatal(err)
			}

			after, err := cli.Status(ctx, tc.members[0].clientURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("database %d bytes (%d in use) before, %d bytes (%d in use) after", before.DBSize, before.DBSizeInUse, after.DBSize, after.DBSizeInUse)
			if after.DBSize >= before.DBSize {
				t.Errorf("defragmentation left the database at %d bytes, it was %d", after.DBSize, before.DBSize)
			}
			if after.DBSizeInUse >= before.DBSizeInUse/2 {
				t.Errorf("compaction and defragmentation left %d bytes in use of %d: the old revisions were not dropped", after.DBSizeInUse, before.DBSizeInUse)
			}
			if alarms, err := cli.Alarms(ctx); err != nil || len(alarms) != 0 {
				t.Errorf("Alarms() = %v, %v after disarming", alarms, err)
			}
			if _, err := raw.Put(ctx, "/after", "yes"); err != nil {
				t.Errorf("writing after the recovery: %v", err)
			}
			if resp, err := raw.Get(ctx, "/kept"); err != nil || len(resp.Kvs) != 1 {
				t.Errorf("the key written before is gone: %v %v", resp, err)
			}
		})
	}
}

// TestEnableAuth turns authentication on with a root user that has no
// password: afterwards a client without a certificate (here, plain HTTP)
// has no identity and cannot write. Turning it off again needs root's
// certificate, which the e2e suite covers on a TLS cluster.
func TestEnableAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := startCluster(t, "v3.6.16", 1)
	cli := tc.client(t)
	if on, err := cli.AuthEnabled(ctx); err != nil || on {
		t.Fatalf("AuthEnabled() = %v, %v on a new cluster", on, err)
	}
	if err := cli.EnableAuth(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if on, err := cli.AuthEnabled(ctx); err != nil || !on {
		t.Fatalf("AuthEnabled() = %v, %v after EnableAuth", on, err)
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, DialTimeout: callTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	if _, err := raw.Put(ctx, "/anonymous", "x"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("an anonymous write with auth on: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
}

// TestTenants enables auth with a root password and checks that a tenant
// reads and writes its prefix and nothing else, that a changed password
// replaces the old one, that a removed tenant cannot authenticate, and
// that DeletePrefix deletes only under its prefix.
func TestTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := startAuthCluster(t, "v3.6.16", 1)
	root := tc.clientAs(t, "root", "root-pw")
	if err := root.EnableAuth(ctx, "root-pw"); err != nil {
		t.Fatalf("EnableAuth again: %v", err)
	}
	for _, tn := range []etcd.Tenant{{User: "tenant-a", Prefix: "/a/", Password: "a-pw"}, {User: "tenant-b", Prefix: "/b/", Password: "b-pw"}} {
		for range 2 { // repeating changes nothing
			if err := root.EnsureTenant(ctx, tn); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw := func(user, password string) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, Username: user, Password: password, DialTimeout: callTimeout, Logger: zap.NewNop()})
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	a := raw("tenant-a", "a-pw")
	if _, err := a.Put(ctx, "/a/x", "1"); err != nil {
		t.Errorf("tenant-a writing under /a/: %v", err)
	}
	for _, key := range []string{"/b/x", "/ax", "/x", "x"} {
		if _, err := a.Put(ctx, key, "1"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("tenant-a writing %s: %v, want permission denied", key, err)
		}
	}
	if _, err := a.Get(ctx, "/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("tenant-a reading everything: %v, want permission denied", err)
	}
	if _, err := raw("tenant-b", "b-pw").Put(ctx, "/b/y", "2"); err != nil {
		t.Errorf("tenant-b writing under /b/: %v", err)
	}
	if err := root.EnsureTenant(ctx, etcd.Tenant{User: "tenant-b", Prefix: "/b/", Password: "b-pw2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, Username: "tenant-b", Password: "b-pw", DialTimeout: callTimeout, Logger: zap.NewNop()}); err == nil {
		t.Error("tenant-b's old password still authenticates")
	}
	raw("tenant-b", "b-pw2")
	if err := root.RemoveTenant(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if err := root.RemoveTenant(ctx, "tenant-a"); err != nil {
		t.Fatalf("removing a removed tenant: %v", err)
	}
	if _, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, Username: "tenant-a", Password: "a-pw", DialTimeout: callTimeout, Logger: zap.NewNop()}); err == nil {
		t.Error("a removed tenant still authenticates")
	}
	if n, err := root.DeletePrefix(ctx, "/b/"); err != nil || n != 1 {
		t.Errorf("DeletePrefix(/b/) = %d, %v, want 1 key", n, err)
	}
	if resp, err := raw("root", "root-pw").Get(ctx, "/a/x"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("/a/x after deleting /b/: %v, %v", resp, err)
	}
}

// startCluster starts n members of a new cluster and waits until each of
// them knows the leader.
// startAuthCluster is startCluster with authentication on: user root,
// password root-pw.
func startAuthCluster(t *testing.T, version string, n int) *cluster {
	t.Helper()
	tc := startCluster(t, version, n)
	if err := tc.client(t).EnableAuth(context.Background(), "root-pw"); err != nil {
		t.Fatal(err)
	}
	return tc
}

func startCluster(t *testing.T, version string, n int, args ...string) *cluster {
	t.Helper()
	tc := &cluster{bin: etcdBinary(t, version), token: strings.ReplaceAll(t.Name(), "/", "-"), args: args}
	type urls struct{ name, peer, client string }
	var all []urls
	var initial []string
	for i := range n {
		u := urls{fmt.Sprintf("m%d", i), localURL(t), localURL(t)}
		all = append(all, u)
		initial = append(initial, u.name+"="+u.peer)
	}
	for _, u := range all {
		tc.start(t, u.name, u.peer, u.client, "new", strings.Join(initial, ","))
	}
	cli := tc.client(t)
	eventually(t, fmt.Sprintf("%d members of etcd %s to know their leader", n, version), func() error {
		for _, m := range tc.members {
			st, err := cli.Status(context.Background(), m.clientURL)
			if err != nil {
				return err
			}
			if st.Leader == 0 {
				return fmt.Errorf("%s has no leader", m.name)
			}
			m.id = st.MemberID
		}
		return nil
	}, tc.members...)
	return tc
}

// start starts one member; it is killed when the test ends.
func (tc *cluster) start(t *testing.T, name, peerURL, clientURL, state, initialCluster string) *process {
	t.Helper()
	return tc.launch(t, name, peerURL, clientURL, filepath.Join(t.TempDir(), "data"), append([]string{
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + tc.token,
		// Faster elections than the 100ms/1s defaults, slow enough for a
		// busy 2-core machine.
		"--heartbeat-interval=50",
		"--election-timeout=500",
	}, tc.args...)...)
}

// startIn starts one member on an existing data directory.
func (tc *cluster) startIn(t *testing.T, name, peerURL, clientURL, dataDir string) *process {
	t.Helper()
	return tc.launch(t, name, peerURL, clientURL, dataDir, "--initial-cluster="+name+"="+peerURL, "--initial-cluster-token="+tc.token)
}

// launch runs etcd as member name with data in dataDir and args; it is
// killed when the test ends.
func (tc *cluster) launch(t *testing.T, name, peerURL, clientURL, dataDir string, args ...string) *process {
	t.Helper()
	p := &process{name: name, peerURL: peerURL, clientURL: clientURL, log: filepath.Join(t.TempDir(), "etcd.log"), done: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(tc.bin, append([]string{
		"--name=" + name,
		"--data-dir=" + dataDir,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
	}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start etcd %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("log of etcd %s:\n%s", name, p.logTail())
		}
	})
	tc.members = append(tc.members, p)
	return p
}

// stop kills the member and waits for it to exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("etcd %s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

func (p *process) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-20):], []byte("\n")))
}

// client returns a Client for every member started so far.
func (tc *cluster) client(t *testing.T) etcd.Client {
	t.Helper()
	return tc.clientAs(t, "", "")
}

// clientAs is a client of every member, authenticated as user.
func (tc *cluster) clientAs(t *testing.T, user, password string) etcd.Client {
	t.Helper()
	var endpoints []string
	for _, m := range tc.members {
		endpoints = append(endpoints, m.clientURL)
	}
	cli, err := etcd.New(etcd.Config{Endpoints: endpoints, CallTimeout: callTimeout, Username: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// leader returns the member every member agrees leads.
func (tc *cluster) leader(t *testing.T, cli etcd.Client) *process {
	t.Helper()
	var leader *process
	eventually(t, "the members to agree on a leader", func() error {
		var ids []uint64
		for _, m := range tc.members {
			st, err := cli.Status(context.Background(), m.clientURL)
			if err != nil {
				return err
			}
			ids = append(ids, st.Leader)
		}
		for _, id := range ids {
			if id == 0 || id != ids[0] {
				return fmt.Errorf("members follow leaders %x", ids)
			}
		}
		i := slices.IndexFunc(tc.members, func(m *process) bool { return m.id == ids[0] })
		if i < 0 {
			return fmt.Errorf("leader %x is none of the members", ids[0])
		}
		leader = tc.members[i]
		return nil
	})
	return leader
}

// eventually calls f until it returns nil and fails the test when
// waitTimeout passes first, or when one of watched exits.
func eventually(t *testing.T, what string, f func() error, watched ...*process) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		for _, p := range watched {
			select {
			case <-p.done:
				t.Fatalf("waiting for %s: etcd %s exited: %v; its log:\n%s", what, p.name, p.cmd.ProcessState, p.logTail())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last error: %v", waitTimeout, what, err)
		}
		<-tick.C
	}
}

// untilAccepted calls the membership change f until etcd accepts it,
// waiting while etcd refuses it with ErrUnhealthyCluster and failing on any
// other error.
func untilAccepted(t *testing.T, what string, f func() error) {
	t.Helper()
	start, refusals := time.Now(), 0
	eventually(t, what, func() error {
		err := f()
		if errors.Is(err, etcd.ErrUnhealthyCluster) {
			refusals++
		} else if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return err
	})
	if refusals > 0 {
		t.Logf("%s: refused %d times as unhealthy over %s", what, refusals, time.Since(start).Round(time.Millisecond))
	}
}

// localURL returns http://127.0.0.1:<a free port>.
func localURL(t *testing.T) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		// The kernel may hand a port it freed out again: once a test took
		// one, no other URL gets it (a member once got the same port for
		// its peer and client URLs, and could not bind the second).
		handedOut.Lock()
		taken := handedOut.addrs[addr]
		handedOut.addrs[addr] = true
		handedOut.Unlock()
		if !taken {
			return "http://" + addr
		}
	}
}

// handedOut are the addresses localURL has returned.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// etcdBinary finds bin/etcd-<version> at the module root.
func etcdBinary(t *testing.T, version string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	bin := filepath.Join(dir, "bin", "etcd-"+version)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcd %s is missing (%v): run `make localcluster-binaries` to build it", version, err)
	}
	return bin
}

// TestStatusAndHealthFailFast: an endpoint nothing serves (a member whose
// Pod is being deleted, or restarting) is reported as not answering when
// the connection is refused, not when the call timeout runs out. Passes
// that probe such a member used to wait the whole call timeout.
func TestStatusAndHealthFailFast(t *testing.T) {
	t.Parallel()
	ep := localURL(t) // nothing listens there
	cli, err := etcd.New(etcd.Config{Endpoints: []string{ep}, CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	_, statusErr := cli.Status(context.Background(), ep)
	healthErr := cli.Health(context.Background(), ep)
	for call, err := range map[string]error{"Status": statusErr, "Health": healthErr} {
		if code := status.Code(errors.Unwrap(err)); err == nil || code != codes.Unavailable {
			t.Errorf("%s of %s, where nothing listens: %v (code %s); want the connection's refusal (Unavailable), not the call timeout", call, ep, err, code)
		}
	}
}

// TestStatusOfAMemberNotServingYet: a member whose etcd has started but
// not joined its cluster listens on its client port without serving it
// (the kernel accepts the connection, nothing answers the handshake). A
// status or health call reports it as not answering after connectWait, not
// after the call timeout; a pass that probed such a learner waited 7 s
// before it could promote it.
func TestStatusOfAMemberNotServingYet(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // never accepts: the backlog holds the connection
	ep := "http://" + l.Addr().String()
	cli, err := etcd.New(etcd.Config{Endpoints: []string{ep}, CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for call, do := range map[string]func() error{
		"Status": func() error { _, err := cli.Status(context.Background(), ep); return err },
		"Health": func() error { return cli.Health(context.Background(), ep) },
	} {
		start := time.Now()
		err := do()
		if took := time.Since(start); err == nil || took > 10*time.Second {
			t.Errorf("%s of %s, which accepts connections and serves nothing: %v after %s; want not answering within seconds, not the call timeout", call, ep, err, took.Round(time.Millisecond))
		}
	}
}

// TestKeptConnectionRedialsAMemberThatIsBack: the connection Status keeps
// for an endpoint (endpointConn) is dialled again once it failed, so a
// member whose Pod restarted answers the first probe after it is back,
// not after gRPC's reconnect back-off, during which the fail-fast calls
// would report it as not answering.
func TestKeptConnectionRedialsAMemberThatIsBack(t *testing.T) {
	t.Parallel()
	ep := localURL(t)
	addr := strings.TrimPrefix(ep, "http://")
	serve := func() *grpc.Server {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		pb.RegisterMaintenanceServer(s, statusServer{})
		go func() { _ = s.Serve(l) }()
		return s
	}
	server := serve()
	cli, err := etcd.New(etcd.Config{Endpoints: []string{ep}, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Status(context.Background(), ep); err != nil {
		t.Fatalf("status while the member serves: %v", err)
	}
	server.Stop()
	// The first call may fail on the connection that was cut; the next
	// ones try to connect again and leave the connection failed, waiting
	// out its back-off.
	for range 3 {
		if _, err := cli.Status(context.Background(), ep); err == nil {
			t.Fatal("status answered while nothing serves the endpoint")
		}
	}
	server = serve()
	defer server.Stop()
	if _, err := cli.Status(context.Background(), ep); err != nil {
		t.Errorf("first status after the member is back: %v; want an answer", err)
	}
}

// TestConnectionNotMadeInTimeIsDialledAgain: a connection that is not made
// within connectWait is not kept for the next call, which dials again.
// The client outlives a pass (Pool): a connection still being made to
// where a restarting member was kept that member unreachable to every
// later pass until gRPC gave the connection up, 20 s on. Here the first
// connection is accepted and never answered; the ones after it are
// served.
func TestConnectionNotMadeInTimeIsDialledAgain(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &silentFirst{Listener: inner}
	s := grpc.NewServer()
	pb.RegisterMaintenanceServer(s, statusServer{})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	defer l.closeHeld()
	ep := "http://" + inner.Addr().String()
	cli, err := etcd.New(etcd.Config{Endpoints: []string{ep}, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Status(context.Background(), ep); err == nil {
		t.Fatal("status answered over a connection nothing answers")
	}
	if _, err := cli.Status(context.Background(), ep); err != nil {
		t.Errorf("second status, the endpoint serving new connections: %v; want an answer over a new connection", err)
	}
}

// silentFirst is a listener that holds its first connection without
// handing it to the server, as an address nothing answers from.
type silentFirst struct {
	net.Listener
	mu   sync.Mutex
	held net.Conn
}

func (l *silentFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		first := l.held == nil
		if first {
			l.held = c
		}
		l.mu.Unlock()
		if !first {
			return c, nil
		}
	}
}

func (l *silentFirst) closeHeld() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		_ = l.held.Close()
	}
}

// statusServer answers etcd's Maintenance.Status with member ID 1.
type statusServer struct {
	pb.UnimplementedMaintenanceServer
}

func (statusServer) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{Header: &pb.ResponseHeader{MemberId: 1, ClusterId: 1}, Leader: 1}, nil
}

// TestSnapshotOfAFollower takes a backup of a real cluster with a password
// through backup.Run onto a directory: it comes from a follower, passes
// etcd's own hash check, and holds the revision the cluster was at.
func TestSnapshotOfAFollower(t *testing.T) {
	t.Parallel()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc := startAuthCluster(t, version, 3)
			raw, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, Username: "root", Password: "root-pw", DialTimeout: callTimeout, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = raw.Close() }()
			var rev int64
			for i := range 300 {
				resp, err := raw.Put(ctx, fmt.Sprintf("/k/%03d", i%100), strings.Repeat("v", i))
				if err != nil {
					t.Fatal(err)
				}
				rev = resp.Header.Revision
			}
			cli := tc.clientAs(t, "root", "root-pw")
			leader := tc.leader(t, cli)

			var endpoints []string
			for _, m := range tc.members {
				endpoints = append(endpoints, m.clientURL)
			}
			root := t.TempDir()
			res := backup.Run(ctx, backup.Params{
				Namespace: "ns", Cluster: "c", BackupUID: "uid-1", Key: "ns/c/b.db",
				Store:     backup.NewVolumeStore(backup.VolumeConfig{Claim: "claim", Root: root}),
				Etcd:      etcd.Config{Endpoints: endpoints, Username: "root", Password: "root-pw", CallTimeout: callTimeout},
				NewClient: etcd.New,
			})
			if !res.Succeeded() {
				t.Fatalf("backup.Run = %+v", res)
			}
			if res.Member == leader.name {
				t.Errorf("the snapshot came from the leader %s", leader.name)
			}
			if res.Revision != rev {
				t.Errorf("revision %d, want %d (the last write's)", res.Revision, rev)
			}
			facts, err := backup.CheckFile(filepath.Join(root, "ns/c/b.db"))
			if err != nil || facts != res.Facts {
				t.Errorf("CheckFile = %+v, %v; want %+v", facts, err, res.Facts)
			}
			if res.Version != strings.TrimPrefix(version, "v") {
				t.Errorf("version %q, want %s", res.Version, version)
			}
		})
	}
}

// TestRestoreFromSnapshot restores a backup of a cluster with a password
// into a new one-member cluster with etcdutl: every key and value and the
// revision come back under a new cluster ID, root's password is the new
// cluster's (the old one is refused), a restore over restored data does
// nothing, and a snapshot with one byte flipped is refused before
// anything is written.
func TestRestoreFromSnapshot(t *testing.T) {
	t.Parallel()
	const version = "v3.6.16"
	ctx := context.Background()
	etcdutl := strings.Replace(etcdBinary(t, version), "/etcd-", "/etcdutl-", 1)
	if _, err := os.Stat(etcdutl); err != nil {
		t.Fatalf("etcdutl %s is missing (%v): run `make localcluster-binaries` to build it", version, err)
	}
	tc := startCluster(t, version, 3)
	if err := tc.client(t).EnableAuth(ctx, "old-pw"); err != nil {
		t.Fatal(err)
	}
	old, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, Username: "root", Password: "old-pw", DialTimeout: callTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Close() }()
	for i := range 200 {
		if _, err := old.Put(ctx, fmt.Sprintf("/k/%03d", i%50), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Delete(ctx, "/k/007"); err != nil {
		t.Fatal(err)
	}
	want, err := old.Get(ctx, "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	oldStatus, err := old.Status(ctx, tc.members[0].clientURL)
	if err != nil {
		t.Fatal(err)
	}

	var endpoints []string
	for _, m := range tc.members {
		endpoints = append(endpoints, m.clientURL)
	}
	store := backup.NewVolumeStore(backup.VolumeConfig{Claim: "claim", Root: t.TempDir()})
	taken := backup.Run(ctx, backup.Params{
		Namespace: "ns", Cluster: "c", BackupUID: "uid-1", Key: "ns/c/b.db", Store: store,
		Etcd:      etcd.Config{Endpoints: endpoints, Username: "root", Password: "old-pw", CallTimeout: callTimeout},
		NewClient: etcd.New,
	})
	if !taken.Succeeded() {
		t.Fatalf("backup.Run = %+v", taken)
	}

	dataDir := t.TempDir()
	peer, clientURL := localURL(t), localURL(t)
	params := backup.RestoreParams{
		DataDir: dataDir, Name: "r0", PeerURL: peer, Token: "restored", From: store, Key: taken.Key,
		Size: taken.Size, SHA256: taken.SHA256, Revision: taken.Revision, Etcdutl: etcdutl,
		AuthEnabled: true, RootPassword: "new-pw",
	}
	if res := backup.Restore(ctx, params); !res.Succeeded() {
		t.Fatalf("backup.Restore = %+v", res)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 1 || entries[0].Name() != "member" {
		t.Errorf("the data directory holds %v, want member/ alone", entries)
	}
	if res := backup.Restore(ctx, params); !res.Succeeded() {
		t.Errorf("a restore over restored data = %+v, want a success that changes nothing", res)
	}

	restored := &cluster{bin: tc.bin, token: "restored"}
	restored.startIn(t, "r0", peer, clientURL, dataDir)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, Username: "root", Password: "new-pw", DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("root with the new password: %v", err)
	}
	defer func() { _ = cli.Close() }()
	var got *clientv3.GetResponse
	eventually(t, "the restored member to serve", func() error {
		got, err = cli.Get(ctx, "/k/", clientv3.WithPrefix())
		return err
	}, restored.members...)
	if len(got.Kvs) != len(want.Kvs) || got.Header.Revision != want.Header.Revision {
		t.Fatalf("restored: %d keys at revision %d; want %d at %d", len(got.Kvs), got.Header.Revision, len(want.Kvs), want.Header.Revision)
	}
	for i, kv := range got.Kvs {
		w := want.Kvs[i]
		if string(kv.Key) != string(w.Key) || string(kv.Value) != string(w.Value) || kv.CreateRevision != w.CreateRevision || kv.ModRevision != w.ModRevision || kv.Version != w.Version {
			t.Errorf("restored %s=%s (create %d, mod %d, version %d); want %s=%s (%d, %d, %d)", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, w.Key, w.Value, w.CreateRevision, w.ModRevision, w.Version)
		}
	}
	if st, err := cli.Status(ctx, clientURL); err != nil || st.Header.ClusterId == oldStatus.Header.ClusterId {
		t.Errorf("restored cluster ID %x (%v); the old one is %x", st.Header.GetClusterId(), err, oldStatus.Header.ClusterId)
	}
	if c, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, Username: "root", Password: "old-pw", DialTimeout: 3 * time.Second, Logger: zap.NewNop()}); err == nil {
		_ = c.Close()
		t.Error("the old cluster's root password still works")
	}
	if _, err := cli.Put(ctx, "/after", "restore"); err != nil {
		t.Errorf("the restored cluster refuses writes: %v", err)
	}

	// One byte flipped in the stored snapshot: refused, nothing written.
	path := filepath.Join(store.(interface{ Root() string }).Root(), taken.Key)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	params.DataDir = t.TempDir()
	if res := backup.Restore(ctx, params); res.Reason != backup.ReasonChecksumMismatch {
		t.Errorf("a restore of a damaged snapshot = %+v, want %s", res, backup.ReasonChecksumMismatch)
	}
	if _, err := os.Stat(filepath.Join(params.DataDir, "member")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a damaged snapshot left member/: %v", err)
	}
}

// TestRestoreFromASurvivor rebuilds a cluster that lost its quorum from
// the one member left, as a recovery does: the survivor serves its status
// and its snapshot without a quorum, the restore refuses a member that is
// not the plan's survivor or has not applied what the plan counted on,
// and the restored member holds every key the survivor held, at its
// revision, under a new cluster ID.
func TestRestoreFromASurvivor(t *testing.T) {
	t.Parallel()
	// The etcdutl the local cluster's images ship (TestRestoreFromSnapshot's).
	for _, version := range []string{"v3.6.16"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			etcdutl := strings.Replace(etcdBinary(t, version), "/etcd-", "/etcdutl-", 1)
			if _, err := os.Stat(etcdutl); err != nil {
				t.Fatalf("etcdutl %s is missing (%v): run `make localcluster-binaries` to build it", version, err)
			}
			tc := startCluster(t, version, 3)
			cli := tc.client(t)
			raw, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.members[0].clientURL}, DialTimeout: callTimeout, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = raw.Close() }()
			for i := range 100 {
				if _, err := raw.Put(ctx, fmt.Sprintf("/k/%03d", i%40), fmt.Sprintf("v%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			want, err := raw.Get(ctx, "/k/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			survivor := tc.members[0]
			tc.members[1].stop(t)
			tc.members[2].stop(t)
			st, err := cli.Status(ctx, survivor.clientURL)
			if err != nil {
				t.Fatalf("the survivor's status without a quorum: %v", err)
			}

			plan := backup.Survivor{
				Etcd: etcd.Config{Endpoints: []string{survivor.clientURL}, CallTimeout: callTimeout}, NewClient: etcd.New,
				MemberID: st.MemberID, ClusterID: st.ClusterID, RaftIndex: st.RaftIndex,
			}
			peer, clientURL := localURL(t), localURL(t)
			restoreFrom := func(from backup.Source) (backup.Result, string) {
				dataDir := t.TempDir()
				return backup.Restore(ctx, backup.RestoreParams{
					DataDir: dataDir, Name: "r0", PeerURL: peer, Token: "recovered", From: from, Etcdutl: etcdutl,
				}), dataDir
			}
			for name, from := range map[string]backup.Survivor{
				"another member":                  func() backup.Survivor { s := plan; s.MemberID++; return s }(),
				"another cluster":                 func() backup.Survivor { s := plan; s.ClusterID++; return s }(),
				"an index it has not applied yet": func() backup.Survivor { s := plan; s.RaftIndex = st.RaftAppliedIndex + 1; return s }(),
			} {
				res, dataDir := restoreFrom(from)
				if res.Reason != backup.ReasonNotTheSurvivor {
					t.Errorf("a restore from %s = %+v, want %s", name, res, backup.ReasonNotTheSurvivor)
				}
				if entries, _ := os.ReadDir(dataDir); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == "member" }) {
					t.Errorf("a restore from %s left member/", name)
				}
			}
			res, dataDir := restoreFrom(plan)
			if !res.Succeeded() || res.Revision != want.Header.Revision {
				t.Fatalf("a restore from the survivor = %+v, want a success at revision %d", res, want.Header.Revision)
			}

			restored := &cluster{bin: tc.bin, token: "recovered"}
			restored.startIn(t, "r0", peer, clientURL, dataDir)
			rc, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = rc.Close() }()
			var got *clientv3.GetResponse
			eventually(t, "the restored member to serve", func() error {
				got, err = rc.Get(ctx, "/k/", clientv3.WithPrefix())
				return err
			}, restored.members...)
			if len(got.Kvs) != len(want.Kvs) || got.Header.Revision != want.Header.Revision {
				t.Fatalf("restored: %d keys at revision %d; want %d at %d", len(got.Kvs), got.Header.Revision, len(want.Kvs), want.Header.Revision)
			}
			for i, kv := range got.Kvs {
				if w := want.Kvs[i]; string(kv.Key) != string(w.Key) || string(kv.Value) != string(w.Value) || kv.ModRevision != w.ModRevision {
					t.Errorf("restored %s=%s (mod %d); want %s=%s (mod %d)", kv.Key, kv.Value, kv.ModRevision, w.Key, w.Value, w.ModRevision)
				}
			}
			if got.Header.ClusterId == st.ClusterID {
				t.Errorf("the restored cluster kept the old cluster ID %x", st.ClusterID)
			}
		})
	}
}

// TestPromoteWithAuthThroughAFollower: with authentication on, a follower
// forwards a promotion to the leader without the caller's identity (etcd
// 3.5.21 drops the token; no version passes on a client certificate's
// user), and the leader refuses it until the call times out. Promote asks
// the leader itself, even through a client that knows only a follower.
func TestPromoteWithAuthThroughAFollower(t *testing.T) {
	t.Parallel()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc := startAuthCluster(t, version, 2)
			root := tc.clientAs(t, "root", "root-pw")
			leader := tc.leader(t, root)
			follower := tc.members[0]
			if follower == leader {
				follower = tc.members[1]
			}
			peerURL, clientURL := localURL(t), localURL(t)
			var learner etcd.Member
			untilAccepted(t, "etcd to accept a learner", func() error {
				var err error
				learner, _, err = root.AddLearner(ctx, []string{peerURL})
				return err
			})
			initial := fmt.Sprintf("%s=%s,%s=%s,m2=%s", tc.members[0].name, tc.members[0].peerURL, tc.members[1].name, tc.members[1].peerURL, peerURL)
			started := tc.start(t, "m2", peerURL, clientURL, "existing", initial)

			viaFollower, err := etcd.New(etcd.Config{Endpoints: []string{follower.clientURL}, CallTimeout: callTimeout, Username: "root", Password: "root-pw"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = viaFollower.Close() }()
			notReady := 0
			eventually(t, "the learner to be promoted through "+follower.name, func() error {
				err := viaFollower.Promote(ctx, learner.ID)
				if errors.Is(err, etcd.ErrLearnerNotReady) {
					notReady++
				} else if err != nil {
					t.Fatalf("Promote through follower %s: %v", follower.name, err)
				}
				return err
			}, started)
			t.Logf("promoted through follower %s after %d refusals as not ready", follower.name, notReady)
		})
	}
}
