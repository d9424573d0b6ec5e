package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/localcluster"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// newHealthCluster creates a 3-member cluster that the operator will not
// replace members of during the test, and waits until it is Ready.
func newHealthCluster(ctx context.Context, t *testing.T, name string, options map[string]string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](3), Options: options,
			UnhealthyMemberTimeout: &metav1.Duration{Duration: time.Hour},
		},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 3)
	// Ready is the topology reconciler's word; the members in the status
	// are the health reconciler's, and its last probe may predate the
	// last promotion. Every health test starts from a status that lists
	// the three members answering.
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse, "All 3 members answer")
	return cluster
}

// awaitCondition waits until the cluster's condition has status and its
// message says every one of says, and returns how long it took.
func awaitCondition(ctx context.Context, t *testing.T, key client.ObjectKey, timeout time.Duration, typ string, status metav1.ConditionStatus, says ...string) time.Duration {
	t.Helper()
	start := time.Now()
	support.Eventually(t, timeout, fmt.Sprintf("%s=%s on %s saying %q", typ, status, key.Name, says), func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, typ)
		if cond == nil || cond.Status != status {
			return fmt.Errorf("%s is %v", typ, cond)
		}
		for _, s := range says {
			if !strings.Contains(cond.Message, s) {
				return fmt.Errorf("%s says %q", typ, cond.Message)
			}
		}
		return nil
	})
	return time.Since(start)
}

// memberStatus returns the status of one member.
func memberStatus(ctx context.Context, t *testing.T, key client.ObjectKey, name string) etcdv1alpha1.MemberStatus {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, c); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Status.Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %s in the status: %+v", name, c.Status.Members)
	return etcdv1alpha1.MemberStatus{}
}

// TestHealthNamesTheSickMember cuts one member off the network, then
// pauses another (SIGSTOP): each time the cluster is reported Degraded
// naming that member, while quorum holds and the operator goes on
// reconciling another cluster; healed, the cluster is healthy again.
func TestHealthNamesTheSickMember(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "sick", nil)
	key := client.ObjectKeyFromObject(cluster)

	faults := []struct{ harm, heal, member string }{
		{localcluster.FaultCut, localcluster.FaultHeal, "sick-1"},
		{localcluster.FaultPause, localcluster.FaultResume, "sick-2"},
	}
	for _, f := range faults {
		inject := func(action string) error {
			return env.Faults.Inject(ctx, localcluster.Fault{Action: action, Namespace: key.Namespace, Pod: f.member, Container: "etcd"})
		}
		if err := inject(f.harm); err != nil {
			t.Fatalf("%s %s: %v", f.harm, f.member, err)
		}
		healed := false
		t.Cleanup(func() {
			if !healed {
				_ = inject(f.heal)
			}
		})
		took := awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, f.member+":")
		t.Logf("%s %s: reported Degraded naming it after %s", f.harm, f.member, took.Round(100*time.Millisecond))
		awaitCondition(ctx, t, key, 10*time.Second, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionTrue)
		if m := memberStatus(ctx, t, key, f.member); m.Healthy || m.LastError == "" {
			t.Errorf("member %s: healthy=%v lastError=%q while %s", f.member, m.Healthy, m.LastError, f.harm)
		}
		if f.harm == localcluster.FaultPause {
			// The operator goes on with other clusters meanwhile.
			other := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "other"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)}}
			if err := k8sClient.Create(ctx, other); err != nil {
				t.Fatal(err)
			}
			t.Logf("another cluster Ready in %s while %s is paused", awaitReady(ctx, t, client.ObjectKeyFromObject(other), 1).Round(time.Second), f.member)
		}
		switch err := inject(f.heal); {
		case err != nil && f.harm == localcluster.FaultPause && strings.Contains(err.Error(), "is not running"):
			// A member paused longer than its liveness probe allows is
			// restarted by the kubelet: there is nothing left to resume.
			t.Logf("%s %s: the liveness probe restarted it already", f.heal, f.member)
		case err != nil:
			t.Fatalf("%s %s: %v", f.heal, f.member, err)
		}
		healed = true
		took = awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse)
		t.Logf("%s %s: healthy again %s after %s", f.harm, f.member, took.Round(100*time.Millisecond), f.heal)
	}
}

// TestStatusWhenAllMembersDown pauses every member: the status says no
// member answers and lists none as healthy; resumed, all are healthy.
func TestStatusWhenAllMembersDown(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "down", nil)
	key := client.ObjectKeyFromObject(cluster)
	members := []string{"down-0", "down-1", "down-2"}
	for _, action := range []string{localcluster.FaultPause, localcluster.FaultResume} {
		for _, m := range members {
			if err := env.Faults.Inject(ctx, localcluster.Fault{Action: action, Namespace: key.Namespace, Pod: m, Container: "etcd"}); err != nil {
				t.Fatal(err)
			}
		}
		if action == localcluster.FaultResume {
			break
		}
		t.Cleanup(func() {
			for _, m := range members {
				_ = env.Faults.Inject(context.Background(), localcluster.Fault{Action: localcluster.FaultResume, Namespace: key.Namespace, Pod: m, Container: "etcd"})
			}
		})
		took := awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionFalse, "No member answers")
		t.Logf("every member paused: QuorumAvailable=False after %s", took.Round(100*time.Millisecond))
		for _, m := range members {
			if s := memberStatus(ctx, t, key, m); s.Healthy || s.LastError == "" {
				t.Errorf("member %s: healthy=%v lastError=%q with every member paused", m, s.Healthy, s.LastError)
			}
		}
	}
	awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse)
	awaitCondition(ctx, t, key, 10*time.Second, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionTrue)
}

// TestNoSpaceIsRecovered fills a small quota until etcd raises NOSPACE and
// refuses writes; the operator compacts, defragments the members one at a
// time and disarms the alarm; writes succeed again and the live keys are
// all there. Live data is about 60% of the quota, so after compaction each
// database file still fills the quota with less free space than the
// fragmentation threshold: disarmed without a defragmentation, etcd would
// raise the alarm again at the next write.
func TestNoSpaceIsRecovered(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "full", map[string]string{"quota-backend-bytes": strconv.Itoa(8 << 20)})
	key := client.ObjectKeyFromObject(cluster)
	cli := etcdClient(ctx, t, key.Namespace, key.Name)
	kept := strings.Repeat("k", 240<<10)
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/live/%02d", i), kept); err != nil {
			t.Fatal(err)
		}
	}
	value := strings.Repeat("x", 256<<10)
	start := time.Now()
	var err error
	for i := 0; i < 400 && err == nil; i++ {
		// One key overwritten: its old revisions fill the database until
		// compaction drops them.
		_, err = cli.Put(ctx, "/filler", value+strconv.Itoa(i))
	}
	if err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("filling the quota: %v, want database space exceeded", err)
	}
	t.Logf("NOSPACE after %s of writes", time.Since(start).Round(time.Millisecond))
	full, err := cli.Get(ctx, "/filler")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	support.Eventually(t, 3*time.Minute, "writes to succeed again", func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Put(cctx, "/after", "yes")
		return err
	})
	t.Logf("writes succeed again %s after NOSPACE", time.Since(start).Round(100*time.Millisecond))
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAlarm, metav1.ConditionFalse)
	resp, err := cli.Get(ctx, "/live/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 20 {
		t.Fatalf("live keys after the recovery: %d, %v; want 20", len(resp.Kvs), err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != kept {
			t.Errorf("key %s lost its value (%d bytes)", kv.Key, len(kv.Value))
		}
	}
	// Writes keep succeeding: the alarm does not come back.
	for i := range 20 {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(cctx, "/after", strconv.Itoa(i))
		cancel()
		if err != nil {
			t.Fatalf("write %d after the recovery: %v", i, err)
		}
	}
	events := &corev1.EventList{}
	if err := k8sClient.List(ctx, events, client.InNamespace(key.Namespace)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events.Items {
		seen[e.Reason]++
	}
	for _, reason := range []string{"AlarmRaised", "Defragmented", "AlarmDisarmed"} {
		if seen[reason] == 0 {
			t.Errorf("no %s event; events by reason: %v", reason, seen)
		}
	}
	// The old revisions went first. Not judged by the Compacted event: a
	// compaction whose answer came too late (a loaded machine) is found
	// done by the next attempt, which has nothing to report.
	if _, err := cli.Get(ctx, "/filler", clientv3.WithRev(full.Header.Revision-1)); !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		t.Errorf("reading revision %d, from before the recovery: %v, want it compacted; events by reason: %v", full.Header.Revision-1, err, seen)
	}
	// Each member whose file still filled the quota was defragmented; one
	// whose file stayed under it after the compaction needs none (which
	// members' files grow past it differs from run to run). Either way,
	// no database is near the quota any more.
	quota := int64(8 << 20)
	for _, p := range memberPods(ctx, t, key) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, "http://"+net.JoinHostPort(p.Status.PodIP, "2379"))
		cancel()
		if err != nil {
			t.Fatalf("status of %s: %v", p.Name, err)
		}
		if st.DbSize*10 >= quota*9 {
			t.Errorf("%s's database file is %d bytes after the recovery, within a tenth of the %d byte quota (%d Defragmented events)", p.Name, st.DbSize, quota, seen["Defragmented"])
		}
	}
}

// TestVolumeHoldsTheQuota: on a claim of the least size (512Mi) without
// a quota in spec.options, a growing database raises etcd's NOSPACE alarm
// before the volume fills up. The member keeps running (a full volume
// crashes it: chaos seed 1 left a member of the former least size, 128Mi,
// panicking on "no space left on device" for good), and once the data is
// deleted the operator clears the alarm and writes succeed again.
func TestVolumeHoldsTheQuota(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Storage: claimsOf()},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 1)
	pod := memberPods(ctx, t, key)[0]
	if want := fmt.Sprintf("--quota-backend-bytes=%d", cluster.QuotaBackendBytes()); !slices.Contains(pod.Spec.Containers[0].Args, want) {
		t.Fatalf("%s's args %v lack %s", pod.Name, pod.Spec.Containers[0].Args, want)
	}
	cli := etcdClient(ctx, t, ns, key.Name)

	// Keys of 1 MiB until etcd refuses: 512 MiB of them without the quota.
	value := strings.Repeat("v", 1<<20)
	var err error
	n := 0
	for ; n < 512 && err == nil; n++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.Put(cctx, fmt.Sprintf("/big/%03d", n), value)
		cancel()
	}
	if err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("after %d keys of 1 MiB: %v, want database space exceeded", n, err)
	}
	t.Logf("NOSPACE after %d keys of 1 MiB", n)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAlarm, metav1.ConditionTrue, "NOSPACE")
	if _, err := cli.Delete(ctx, "/big/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("deleting the keys under NOSPACE: %v", err)
	}
	support.Eventually(t, 3*time.Minute, "writes to succeed again", func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Put(cctx, "/after", "yes")
		return err
	})
	after := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), after); err != nil {
		t.Fatal(err)
	}
	if after.UID != pod.UID || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("%s was restarted or replaced (restarts %d): its volume filled up", pod.Name, after.Status.ContainerStatuses[0].RestartCount)
	}
}

// TestLongDefragmentation defragments a follower of a 3-member cluster
// holding 256 MiB of live data (on claims, which the local cluster keeps
// in memory), held to a tenth of a CPU (throttle) and, once the operator
// has marked it defragmenting, paused for 35 s in the middle of it, with
// spec.unhealthyMemberTimeout at its least, 10 s: the follower answers
// nothing while it rewrites its database, for longer than etcd's usual
// liveness budget (3 failed /livez 10 s apart) and than the 15 s after
// which its Pod turns NotReady. It is neither restarted nor replaced:
// same member ID, same Pod, no restart, and the cluster serves writes.
//
// The pause, not the amount of data, makes the defragmentation long: how
// long a throttled member takes to rewrite its data varied tenfold between
// machines (1.1 GiB: 40 s on some, 8 minutes on others, which made this
// the suite's longest test), a pause lasts as long on all of them.
func TestLongDefragmentation(t *testing.T) {
	support.Parallel(t, support.Long)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:               ptr.To[int32](3),
			UnhealthyMemberTimeout: &metav1.Duration{Duration: 10 * time.Second}, // the least allowed
			// A quota of 8 GiB (etcd's largest recommended) gives a
			// defragmentation a budget of 819 s (DefragmentBudget: the
			// quota at 10 MiB/s), far more than the throttled follower
			// takes with the pause: it is not replaced for overrunning its
			// budget (as it was, by design, when a 4Gi claim's quota gave
			// 184 s). The claim holds the quota twice (a defragmentation
			// writes a copy) and the log; the local cluster's claims are
			// tmpfs, sized as a limit.
			Options: map[string]string{"quota-backend-bytes": strconv.FormatInt(8<<30, 10)},
			Storage: etcdv1alpha1.StorageSpec{VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("18Gi")}},
			}}},
		},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 3)
	cli := etcdClient(ctx, t, ns, key.Name)

	// 256 values of 1 MiB, four writers at once: the throttled follower
	// takes seconds to rewrite them even on a fast machine, so the pause
	// lands in the middle of it.
	start := time.Now()
	value := strings.Repeat("v", 1<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < 256; i += 4 {
				// A put the server timed out (its proposal not applied in
				// time, as on a loaded machine: CI's cold run) is written
				// again: the same key and value, filler whichever way.
				var err error
				for range 3 {
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					_, err = cli.Put(cctx, fmt.Sprintf("/big/%04d", i), value)
					cancel()
					if !errors.Is(rpctypes.Error(err), rpctypes.ErrTimeout) {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("writing 256 MiB: %v", err)
	}
	t.Logf("wrote 256 MiB in %s", time.Since(start).Round(time.Second))

	ids := support.MemberIDs(ctx, t, cli)
	status, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	follower := ""
	for _, name := range []string{"big-1", "big-2", "big-0"} {
		if ids[name] != status.Leader && follower == "" {
			follower = name
		}
	}
	before := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: follower}, before); err != nil {
		t.Fatal(err)
	}
	fault := localcluster.Fault{Action: localcluster.FaultThrottle, Namespace: ns, Pod: follower, Container: "etcd"}
	if err := env.Faults.Inject(ctx, fault); err != nil {
		t.Fatal(err)
	}
	unthrottle := func() {
		fault.Action = localcluster.FaultUnthrottle
		_ = env.Faults.Inject(context.Background(), fault)
	}
	t.Cleanup(unthrottle)

	start = time.Now()
	kubectlEtcd(ctx, t, ns, "defrag", key.Name, "--member", follower)
	notReady := time.Duration(0)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			p := &corev1.Pod{}
			if k8sClient.Get(ctx, client.ObjectKeyFromObject(before), p) == nil && !podReady(p) && notReady == 0 {
				notReady = time.Since(start)
			}
		}
	}()
	defragmenting := func() bool {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(before), p); err != nil {
			t.Fatal(err)
		}
		_, ok := p.Annotations[etcdv1alpha1.AnnotationDefragmenting]
		return ok
	}
	support.Eventually(t, time.Minute, "the operator to mark "+follower+" defragmenting", func() error {
		if !defragmenting() {
			return errors.New("not marked yet")
		}
		return nil
	})
	pause := localcluster.Fault{Action: localcluster.FaultPause, Namespace: ns, Pod: follower, Container: "etcd"}
	if err := env.Faults.Inject(ctx, pause); err != nil {
		t.Fatal(err)
	}
	resume := func() {
		pause.Action = localcluster.FaultResume
		_ = env.Faults.Inject(context.Background(), pause)
	}
	t.Cleanup(resume)
	// 35 s: more than the 30 s of etcd's liveness budget and the 10 s of
	// unhealthyMemberTimeout, less than the 40 s after which the
	// operator's client gives up on a connection that answers no
	// keepalive ping (30 s idle, 10 s for the answer) and ends the call.
	time.Sleep(35 * time.Second)
	// Still marked: the operator is still waiting on the defragmentation
	// (had it ended before the pause, the mark would be gone by now and
	// the test would prove nothing).
	stillDefragmenting := defragmenting()
	resume()
	if !stillDefragmenting {
		t.Errorf("%s was no longer marked defragmenting at the end of the pause: the defragmentation ended before it", follower)
	}
	awaitNoAnnotation(ctx, t, key, 15*time.Minute, etcdv1alpha1.AnnotationDefragment)
	took := time.Since(start)
	close(stop)
	<-sampled
	unthrottle()
	t.Logf("%s defragmented %s after the request; its Pod turned NotReady after %s", follower, took.Round(time.Second), notReady.Round(time.Second))
	// Otherwise the test proves nothing: the defragmentation must have
	// outlasted etcd's usual liveness budget and turned the Pod NotReady
	// (what a short unhealthyMemberTimeout replaces).
	if took < 30*time.Second || notReady == 0 {
		t.Errorf("the defragmentation took %s and the Pod turned NotReady after %s: too short to prove anything", took.Round(time.Second), notReady)
	}

	after := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(before), after); err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Errorf("the Pod of %s was replaced during its defragmentation", follower)
	}
	if b, a := before.Status.ContainerStatuses[0].RestartCount, after.Status.ContainerStatuses[0].RestartCount; a != b {
		t.Errorf("%s restarted %d times during its defragmentation", follower, a-b)
	}
	if v, ok := after.Annotations[etcdv1alpha1.AnnotationDefragmenting]; ok {
		t.Errorf("%s is still marked defragmenting (%s)", follower, v)
	}
	if got := support.MemberIDs(ctx, t, cli); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("members %v after the defragmentation, %v before", got, ids)
	}
	awaitReady(ctx, t, key, 3)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(cctx, "/after-defrag", "yes"); err != nil {
		t.Errorf("write after the defragmentation: %v", err)
	}
}

// TestMetrics scrapes the operator's metrics endpoint as Prometheus would,
// with a ServiceAccount token allowed to read /metrics, and checks the
// series of a healthy 3-member cluster.
func TestMetrics(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "measured", nil)
	key := client.ObjectKeyFromObject(cluster)
	token := metricsToken(ctx, t, key.Namespace)
	series := map[string]float64{}
	support.Eventually(t, time.Minute, "the metrics of 3 healthy members", func() error {
		var err error
		if series, err = scrapeOperator(ctx, token, key); err != nil {
			return err
		}
		// The series are the health reconciler's last probe: the cluster
		// is Ready once the last learner is promoted, the series follow at
		// the next probe.
		leaders, learners := 0.0, 0.0
		for _, m := range []string{"measured-0", "measured-1", "measured-2"} {
			if series["etcd_operator_member_healthy/"+m] != 1 {
				return fmt.Errorf("member %s healthy=%v", m, series["etcd_operator_member_healthy/"+m])
			}
			leaders += series["etcd_operator_member_leader/"+m]
			learners += series["etcd_operator_member_learner/"+m]
		}
		if leaders != 1 || learners != 0 {
			return fmt.Errorf("%v leaders and %v learners, want 1 and 0", leaders, learners)
		}
		return nil
	})
	for _, m := range []string{"measured-0", "measured-1", "measured-2"} {
		if series["etcd_operator_member_db_size_bytes/"+m] <= 0 || series["etcd_operator_member_db_size_in_use_bytes/"+m] <= 0 {
			t.Errorf("member %s: database size %v, in use %v", m, series["etcd_operator_member_db_size_bytes/"+m], series["etcd_operator_member_db_size_in_use_bytes/"+m])
		}
	}
	if series["etcd_operator_cluster_quorum_available/"] != 1 {
		t.Errorf("quorum available = %v, want 1", series["etcd_operator_cluster_quorum_available/"])
	}
	t.Logf("series of cluster %s: %v", key.Name, series)
}

// metricsToken creates a ServiceAccount bound to the operator's
// metrics-reader ClusterRole and returns a token of it.
func metricsToken(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	if err := k8sClient.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "etcd-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}},
	}
	if err := k8sClient.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), binding) })
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrapeOperator reads the operator's metrics over HTTPS on its Pod's IP
// and returns the etcd_operator_* samples of one cluster, keyed by
// "<name>/<member>" ("<name>/" for cluster series).
func scrapeOperator(ctx context.Context, token string, key client.ObjectKey) (map[string]float64, error) {
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(operatorDeployment.Namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		return nil, fmt.Errorf("%d operator Pods", len(pods.Items))
	}
	url := "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "8443") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// The manager serves a self-signed certificate unless given one.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test scrape of a self-signed endpoint
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "etcd_operator_") || !strings.Contains(line, `namespace="`+key.Namespace+`"`) || !strings.Contains(line, `cluster="`+key.Name+`"`) {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels, value, _ := strings.Cut(rest, "} ")
		member := ""
		if _, after, ok := strings.Cut(labels, `member="`); ok {
			member, _, _ = strings.Cut(after, `"`)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", line, err)
		}
		out[name+"/"+member] += v
	}
	return out, sc.Err()
}
