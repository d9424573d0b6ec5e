package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/localcluster"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestQuorumLostForGood takes the quorum of a 3-member emptyDir cluster
// away twice. First two members are cut off the network while a writer
// runs: their Pods and data are there, so the quorum will come back; it
// is never reported lost for good, and once healed the cluster serves its
// data again, every acknowledged write with it. Then
// the third is cut off while the two commit 20 writes, the two are paused
// and their Pods deleted, and the third healed: the data of the two went
// with the emptyDirs, the one left is behind and cannot form a quorum
// again. The cluster says so, naming the gone members and the survivor
// with its raft index; status.recoveryPlan counts at least the 20 entries
// the survivor lacks, under an ID that stays while nothing changes; and
// the operator changes nothing for 2 minutes, nor on an approval naming
// another plan (condition Recovered, StalePlan): the survivor's Pod stays
// and no member Pod is created. Approved, the cluster is rebuilt from the
// survivor within 60 s: three voters under a new cluster ID, every key the
// survivor held, no more writes lost than the plan put at risk.
func TestQuorumLostForGood(t *testing.T) {
	support.Parallel(t, support.Long)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "lost", nil)
	key := client.ObjectKeyFromObject(cluster)
	cli := etcdClient(ctx, t, key.Namespace, key.Name)
	if _, err := cli.Put(ctx, "kept", "yes"); err != nil {
		t.Fatal(err)
	}
	const before = 30
	for i := range before {
		if _, err := cli.Put(ctx, fmt.Sprintf("before-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	inject := func(action, pod string) error {
		return env.Faults.Inject(ctx, localcluster.Fault{Action: action, Namespace: key.Namespace, Pod: pod, Container: builder.EtcdContainerName})
	}
	lost := []string{"lost-1", "lost-2"}

	// A partition: the quorum comes back with the members cut off, and
	// no write a writer got acknowledged through it is lost.
	wr, stopWriter := support.LaunchWriter(ctx, cli)
	defer stopWriter()
	for _, m := range lost {
		if err := inject(localcluster.FaultCut, m); err != nil {
			t.Fatal(err)
		}
	}
	healed := false
	t.Cleanup(func() {
		for _, m := range lost {
			if !healed {
				_ = inject(localcluster.FaultHeal, m)
			}
		}
	})
	took := awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionFalse,
		"No quorum: 1 of 3 voting members answer (lost-0)", "lost-1, lost-2 keep their Pods and data")
	t.Logf("two members cut off: QuorumAvailable=False, the quorum to come back, after %s", took.Round(100*time.Millisecond))
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if cond := quorumCondition(ctx, t, key); cond.Reason == etcdv1alpha1.ReasonQuorumLostForGood {
			t.Fatalf("a partition was reported as a quorum lost for good: %s", cond.Message)
		}
	}
	for _, m := range lost {
		if err := inject(localcluster.FaultHeal, m); err != nil {
			t.Fatal(err)
		}
	}
	healed = true
	took = awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionTrue)
	t.Logf("healed: quorum back after %s", took.Round(100*time.Millisecond))
	// The writer, which a quorum cut off could not serve, writes again.
	healedAt := time.Now()
	support.Eventually(t, time.Minute, "the writer to write once the partition healed", func() error {
		if wr.AckedSince(healedAt) == 0 {
			return errors.New("no write acknowledged since the quorum came back")
		}
		return nil
	})
	stopWriter()
	if lost := wr.Lost(ctx, t, cli); len(lost) > 0 {
		t.Fatalf("%d acknowledged writes lost through a partition, first %s (acknowledged at %s)", len(lost), lost[0].Key, lost[0].At.Format(time.StampMilli))
	}
	if resp, err := cli.Get(ctx, "kept"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after the partition healed, get kept = %v, %v", resp, err)
	}

	if c := getCluster(ctx, t, key); c.Status.RecoveryPlan != nil {
		t.Errorf("after a partition, a recovery plan: %+v", *c.Status.RecoveryPlan)
	}

	// The survivor-to-be falls behind: cut off while the other two commit
	// writes, until a probe has seen them ahead (the high-water mark of
	// the recovery plan).
	if err := inject(localcluster.FaultCut, "lost-0"); err != nil {
		t.Fatal(err)
	}
	behindFrom := int64(memberStatus(ctx, t, key, "lost-0").RaftIndex)
	var endpoints []string
	for _, m := range lost {
		pod := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: m}, pod); err != nil {
			t.Fatal(err)
		}
		endpoints = append(endpoints, "http://"+net.JoinHostPort(pod.Status.PodIP, "2379"))
	}
	// Straight to the two, not through the Service, which may route to
	// lost-0 until its Pod is seen not Ready.
	pair, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pair.Close() }()
	const behind = 20
	for i := range behind {
		support.Eventually(t, time.Minute, "a put with lost-0 cut off", func() error {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := pair.Put(pctx, fmt.Sprintf("behind-%d", i), "x")
			return err
		})
	}
	// The raft index lost-1 reached, asked of lost-1 itself: the status
	// lost-0 was seen at before the cut may be older than the cut, and a
	// probe that ran during the puts may show lost-1 20 entries ahead of
	// it while lost-1 went further (the plan then counted 15 entries at
	// risk where 20 acknowledged writes were lost, and the test failed).
	reached, err := pair.Status(ctx, endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	var ahead int64
	support.Eventually(t, time.Minute, "a probe to see lost-1 where it is", func() error {
		if ahead = int64(memberStatus(ctx, t, key, "lost-1").RaftIndex); ahead < int64(reached.RaftIndex) || ahead < behindFrom+behind {
			return fmt.Errorf("lost-1 seen at raft index %d, it is at %d; lost-0 was seen at %d", ahead, reached.RaftIndex, behindFrom)
		}
		return nil
	})

	// Two members gone with their data: paused first, so that no
	// membership change can happen between the two deletions.
	survivor := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "lost-0"}, survivor); err != nil {
		t.Fatal(err)
	}
	for _, m := range lost {
		if err := inject(localcluster.FaultPause, m); err != nil {
			t.Fatal(err)
		}
	}
	var netns []string
	for _, m := range lost {
		pod := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: m}, pod); err != nil {
			t.Fatal(err)
		}
		netns = append(netns, env.Network.PodNetnsPath(string(pod.UID)))
		if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	// What the two sent lost-0 while it was cut waits in their sockets'
	// send queues, which the kernel delivers once the link is up, paused
	// process or not (a first version of this test found lost-0 caught
	// up): lost-0 comes back only once their network namespaces, and
	// their sockets with them, are gone.
	support.Eventually(t, time.Minute, "the network namespaces of lost-1 and lost-2 to be gone", func() error {
		for _, path := range netns {
			switch _, err := os.Stat(path); {
			case err == nil:
				return fmt.Errorf("%s is still there", path)
			case !os.IsNotExist(err):
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		return nil
	})
	if err := inject(localcluster.FaultHeal, "lost-0"); err != nil {
		t.Fatal(err)
	}
	took = awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionFalse,
		"Quorum lost for good: 2 of 3 voting members are gone with their data",
		"lost-1 (its Pod is gone, and its data was on an emptyDir)", "lost-2 (its Pod is gone",
		"Survivors, the most advanced first: lost-0 (raft index ")
	cond := quorumCondition(ctx, t, key)
	if cond.Reason != etcdv1alpha1.ReasonQuorumLostForGood {
		t.Fatalf("QuorumAvailable reason %q, want %q", cond.Reason, etcdv1alpha1.ReasonQuorumLostForGood)
	}
	t.Logf("two members gone with their data: reported after %s: %s", took.Round(100*time.Millisecond), cond.Message)

	// The plan: rebuild from lost-0, which lacks at least the writes it
	// missed. Its ID stays while nothing changes.
	plan := getCluster(ctx, t, key).Status.RecoveryPlan
	if plan == nil {
		t.Fatal("no status.recoveryPlan with the quorum lost for good")
	}
	t.Logf("recovery plan %s: survivor %s at raft index %d (term %d, applied %d), highest seen %d, %d entries at risk, gone %v",
		plan.ID, plan.Survivor, plan.RaftIndex, plan.RaftTerm, plan.AppliedIndex, plan.HighestRaftIndexSeen, plan.EntriesAtRisk, plan.Gone)
	if plan.Survivor != "lost-0" || len(plan.Gone) != 2 || plan.HighestRaftIndexSeen < ahead ||
		plan.EntriesAtRisk < behind || plan.EntriesAtRisk != plan.HighestRaftIndexSeen-plan.RaftIndex {
		t.Errorf("recovery plan %+v: want lost-0 to survive, lost-1 and lost-2 gone, at least %d entries at risk below raft index %d", *plan, behind, ahead)
	}

	// What the survivor holds, read from it alone.
	alone, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + net.JoinHostPort(survivor.Status.PodIP, "2379")}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = alone.Close() }()
	held, err := alone.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("a serializable read from the survivor: %v", err)
	}

	// The operator changes nothing on its own for 2 minutes, and an
	// approval of another plan changes nothing either.
	stale := "000000000000"
	annotate(ctx, t, key, etcdv1alpha1.AnnotationApproveRecovery, stale)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionRecovered, metav1.ConditionFalse, stale, "current one, "+plan.ID, "nothing changes")
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if err := onlyPod(ctx, key.Namespace, survivor.UID); err != nil {
			t.Fatalf("with the quorum lost for good: %v", err)
		}
	}
	if now := getCluster(ctx, t, key).Status.RecoveryPlan; now == nil || now.ID != plan.ID {
		t.Fatalf("2 minutes later, with nothing changed, the recovery plan is %+v, was %s", now, plan.ID)
	}

	// Approved: rebuilt from lost-0, with three voters again.
	approved := time.Now()
	annotate(ctx, t, key, etcdv1alpha1.AnnotationApproveRecovery, plan.ID)
	awaitReady(ctx, t, key, 3)
	took = time.Since(approved)
	c := getCluster(ctx, t, key)
	rec := c.Status.Recovery
	t.Logf("approved plan %s: Ready with 3 voters after %s; recovery %+v", plan.ID, took.Round(100*time.Millisecond), rec)
	// Issue #21 asks for 60 s; the figures are in docs/recovery.md. The
	// bound here catches a rebuild that stalls, not a slow machine.
	if took > 2*time.Minute {
		t.Errorf("Ready %s after the approval, want within 2 minutes", took.Round(time.Second))
	}
	switch {
	case rec == nil || rec.PlanID != plan.ID || rec.Survivor != "lost-0" || rec.CompletedAt == nil:
		t.Fatalf("status.recovery = %+v, want plan %s from lost-0, complete", rec, plan.ID)
	case rec.FromClusterID == c.Status.ClusterID:
		t.Errorf("the rebuilt cluster kept the cluster ID %s", c.Status.ClusterID)
	case rec.ResumedAtRevision != held.Header.Revision:
		t.Errorf("resumed at revision %d, the survivor held %d", rec.ResumedAtRevision, held.Header.Revision)
	}
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionRecovered, metav1.ConditionTrue, "Rebuilt from survivor lost-0", plan.ID)
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(survivor), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old survivor's Pod: %v, want it deleted", err)
	}

	// Every write the survivor held is there; of the writes it missed, as
	// many are lost as the plan's bound allows.
	cli = etcdClient(ctx, t, key.Namespace, key.Name)
	got := readRebuilt(ctx, t, cli, "", clientv3.WithKeysOnly())
	have := map[string]bool{}
	for _, kv := range got.Kvs {
		have[string(kv.Key)] = true
	}
	for _, kv := range held.Kvs {
		if !have[string(kv.Key)] {
			t.Errorf("%s, which the survivor held, is gone", kv.Key)
		}
	}
	lostWrites := 0
	for i := range behind {
		if !have[fmt.Sprintf("behind-%d", i)] {
			lostWrites++
		}
	}
	t.Logf("kept all %d keys the survivor held (%d before the loss and \"kept\"); lost %d of the %d writes acknowledged while it was cut off; the plan put %d raft entries at risk",
		len(held.Kvs), before, lostWrites, behind, plan.EntriesAtRisk)
	if int64(lostWrites) > plan.EntriesAtRisk {
		t.Errorf("%d acknowledged writes lost, more than the plan's %d entries at risk", lostWrites, plan.EntriesAtRisk)
	}
	if _, err := cli.Put(ctx, "after", "recovery"); err != nil {
		t.Errorf("the rebuilt cluster refuses a write: %v", err)
	}
}

// readRebuilt reads the keys under prefix from a rebuilt cluster, once it
// answers.
func readRebuilt(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, opts ...clientv3.OpOption) *clientv3.GetResponse {
	t.Helper()
	var got *clientv3.GetResponse
	support.Eventually(t, time.Minute, "a read of the rebuilt cluster", func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		got, err = cli.Get(rctx, prefix, append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
		return err
	})
	return got
}

// annotate sets annotation k=v on the cluster of key.
func annotate(ctx context.Context, t *testing.T, key client.ObjectKey, k, v string) {
	t.Helper()
	c := getCluster(ctx, t, key)
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[k] = v
	if err := k8sClient.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
}

// getCluster reads the cluster of key.
func getCluster(ctx context.Context, t *testing.T, key client.ObjectKey) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// quorumCondition is the cluster's QuorumAvailable condition.
func quorumCondition(ctx context.Context, t *testing.T, key client.ObjectKey) metav1.Condition {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, c); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumAvailable); cond != nil {
		return *cond
	}
	return metav1.Condition{}
}

// onlyPod checks that the Pod of UID uid is the only Pod in namespace ns,
// and is not being deleted.
func onlyPod(ctx context.Context, ns string, uid types.UID) error {
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return err
	}
	if len(pods.Items) != 1 || pods.Items[0].UID != uid || pods.Items[0].DeletionTimestamp != nil {
		var names []string
		for _, p := range pods.Items {
			names = append(names, fmt.Sprintf("%s (uid %s, deleting %v)", p.Name, p.UID, p.DeletionTimestamp != nil))
		}
		return fmt.Errorf("Pods %v, want only the survivor (uid %s)", names, uid)
	}
	return nil
}

// TestQuorumLostForGoodFiveTLS loses three of five members of a cluster
// with TLS and authentication (the operator a client-certificate root)
// with their data while a writer runs: the plan is shown and nothing
// changes until it is approved; then the cluster is rebuilt from the most
// advanced survivor, the seed reading its snapshot over TLS, and is Ready
// with five voters (within 2 minutes; see the bound below), holding every
// key, both old Pods gone. Of
// the writer's acknowledged writes, only some of those acknowledged in
// the last second before the loss may be lost (the survivors, healthy
// followers until then, hold every earlier one), and none after the
// rebuild; the test reports how many against the plan's estimate.
func TestQuorumLostForGoodFiveTLS(t *testing.T) {
	support.Parallel(t, support.Long)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "five"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](5), UnhealthyMemberTimeout: &metav1.Duration{Duration: time.Hour},
			Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true, TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	awaitReady(ctx, t, key, 5)
	cert, roots := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
	cli := tlsClient(ctx, t, ns, c.Name, roots, cert)
	const keys = 50
	for i := range keys {
		if _, err := cli.Put(ctx, fmt.Sprintf("k-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}

	wr, stopWriter := support.LaunchWriter(ctx, tlsClient(ctx, t, ns, c.Name, roots, cert))
	defer stopWriter()
	support.Eventually(t, time.Minute, "the writer to write", func() error {
		if wr.AckedSince(time.Time{}) < 50 {
			return errors.New("fewer than 50 writes acknowledged")
		}
		return nil
	})

	gone := []string{"five-0", "five-1", "five-2"}
	lossFrom := time.Now()
	for _, m := range gone {
		if err := env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultPause, Namespace: ns, Pod: m, Container: builder.EtcdContainerName}); err != nil {
			t.Fatal(err)
		}
	}
	lossTo := time.Now()
	for _, m := range gone {
		if err := k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	took := awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionFalse,
		"Quorum lost for good: 3 of 5 voting members are gone with their data", etcdv1alpha1.AnnotationApproveRecovery+"=")
	plan := getCluster(ctx, t, key).Status.RecoveryPlan
	if plan == nil || len(plan.Gone) != 3 || (plan.Survivor != "five-3" && plan.Survivor != "five-4") {
		t.Fatalf("after %s, recovery plan %+v: want five-3 or five-4 to survive, three gone", took.Round(time.Second), plan)
	}
	t.Logf("three of five gone: plan %s after %s: survivor %s at raft index %d, %d entries at risk", plan.ID, took.Round(100*time.Millisecond), plan.Survivor, plan.RaftIndex, plan.EntriesAtRisk)
	// Nothing changes without an approval, for 2 minutes as with three.
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(2 * time.Second) {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Fatalf("without approval, %d Pods, want the two survivors", len(pods.Items))
		}
	}
	if now := getCluster(ctx, t, key).Status.RecoveryPlan; now == nil || now.ID != plan.ID {
		t.Fatalf("2 minutes later, with nothing changed, the recovery plan is %+v, was %s", now, plan.ID)
	}

	approved := time.Now()
	annotate(ctx, t, key, etcdv1alpha1.AnnotationApproveRecovery, plan.ID)
	awaitReady(ctx, t, key, 5)
	took = time.Since(approved)
	readyAt := time.Now()
	rec := getCluster(ctx, t, key).Status.Recovery
	t.Logf("approved: Ready with 5 voters after %s; recovery %+v", took.Round(100*time.Millisecond), rec)
	// Issue #21 asks for 60 s; the figures are in docs/recovery.md (most
	// of it is adding the four members back one at a time). The bound
	// here catches a rebuild that stalls, not a slow machine.
	if took > 2*time.Minute {
		t.Errorf("Ready %s after the approval, want within 2 minutes", took.Round(time.Second))
	}
	if rec == nil || rec.CompletedAt == nil || rec.Survivor != plan.Survivor || len(rec.Retired) != 2 {
		t.Fatalf("status.recovery = %+v, want complete, from %s, the two survivors retired", rec, plan.Survivor)
	}
	for _, m := range rec.Retired {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: m}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("the old cluster's Pod %s: %v, want it deleted", m, err)
		}
	}
	cli = tlsClient(ctx, t, ns, c.Name, roots, cert)
	got := readRebuilt(ctx, t, cli, "k-", clientv3.WithCountOnly())
	if got.Count != keys {
		t.Errorf("the rebuilt cluster holds %d of the %d keys", got.Count, keys)
	}
	assertMembers(ctx, t, cli, ns, 5)

	// The writer writes again, and what it lost is what the survivor
	// could lack.
	support.Eventually(t, time.Minute, "the writer to write to the rebuilt cluster", func() error {
		if wr.AckedSince(readyAt) == 0 {
			return errors.New("no write acknowledged since the cluster was Ready")
		}
		return nil
	})
	stopWriter()
	lost := wr.Lost(ctx, t, cli)
	for _, a := range lost {
		// An answer sent before the last pause may arrive just after it.
		if a.At.Before(lossFrom.Add(-time.Second)) || a.At.After(lossTo.Add(time.Second)) {
			t.Errorf("write %s, acknowledged at %s, is lost: want only writes acknowledged around the loss (%s to %s) lost",
				a.Key, a.At.Format(time.StampMilli), lossFrom.Add(-time.Second).Format(time.StampMilli), lossTo.Add(time.Second).Format(time.StampMilli))
		}
	}
	t.Logf("with a writer running: %d acknowledged writes lost, of %d acknowledged around the loss; the plan put %d raft entries at risk",
		len(lost), wr.AckedSince(lossFrom.Add(-time.Second))-wr.AckedSince(lossTo.Add(time.Second)), plan.EntriesAtRisk)
}
