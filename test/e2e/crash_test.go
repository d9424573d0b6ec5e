package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/crashpoint"
	"github.com/etcd-operator/etcd-operator/internal/localcluster"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// killOperator kills the operator's container (SIGKILL: no cleanup, no
// lease handover) and waits until it runs again.
func killOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace("etcd-operator-system"), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		err := env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultKill, Namespace: p.Namespace, Pod: p.Name, Container: "manager"})
		if err != nil {
			t.Logf("killing the operator: %v", err)
		}
	}
}

// TestOperatorKilledMidChange scales a cluster up and down while killing
// the operator again and again, at whatever step it is in (adding a
// learner, creating its Pod, promoting, removing, deleting a Pod): every
// pass re-derives its step from etcd and the API server, so it converges.
//
// Runs alone (no t.Parallel): it kills the operator every other test relies on.
func TestOperatorKilledMidChange(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{}
	cluster.Namespace, cluster.Name = ns, "crashy"
	cluster.Spec.Replicas = ptr.To[int32](1)
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 1)
	cli := etcdClient(ctx, t, ns, "crashy")
	if _, err := cli.Put(ctx, "/e2e/before", "x"); err != nil {
		t.Fatal(err)
	}

	for _, n := range []int32{5, 2} {
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Replicas = ptr.To(n)
		if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
			t.Fatal(err)
		}
		// Kill it three times while it works, a few seconds apart.
		for i := range 3 {
			time.Sleep(time.Duration(2+2*i) * time.Second) // spread the kills over the change; not a wait for state
			killOperator(ctx, t)
		}
		took := awaitReady(ctx, t, key, n)
		assertMembers(ctx, t, cli, ns, int(n))
		t.Logf("reached %d members %s after the last kill", n, took.Round(time.Second))
	}
	support.Eventually(t, time.Minute, "the data written before to be readable", func() error {
		resp, err := cli.Get(ctx, "/e2e/before")
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 {
			return fmt.Errorf("key missing")
		}
		return nil
	})
}

// operatorDeployment is the operator as config/ installs it.
var operatorDeployment = client.ObjectKey{Namespace: "etcd-operator-system", Name: "etcd-operator-controller-manager"}

// armCrashPoints restarts the operator with crash points armed at steps,
// each firing once per Pod (they remember in an emptyDir), and disarms
// them when the test ends. It returns the armed operator's Pod.
//
// The armed operator holds a shorter lease (shortLease): a crashed
// operator's successor still waits for the lease to run out, as after a
// real crash, but 6 s instead of 15, eleven times over. What the test
// checks, that each restart re-derives its step, does not depend on how
// long the successor waits.
func armCrashPoints(ctx context.Context, t *testing.T, steps []string) *corev1.Pod {
	t.Helper()
	const volume = "crashpoints"
	setCrashPoints := func(arm bool) {
		t.Helper()
		// The Deployment controller writes its status meanwhile (a
		// rollout that just began): read and update again on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, operatorDeployment, d); err != nil {
				return err
			}
			spec := &d.Spec.Template.Spec
			ctr := &spec.Containers[0]
			ctr.Env = slices.DeleteFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == crashpoint.EnvSteps || e.Name == crashpoint.EnvDir })
			ctr.Args = slices.DeleteFunc(ctr.Args, func(a string) bool { return slices.Contains(shortLease, a) })
			ctr.VolumeMounts = slices.DeleteFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume })
			spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
			if arm {
				ctr.Env = append(ctr.Env, corev1.EnvVar{Name: crashpoint.EnvSteps, Value: strings.Join(steps, ",")}, corev1.EnvVar{Name: crashpoint.EnvDir, Value: "/crashpoints"})
				ctr.Args = append(ctr.Args, shortLease...)
				ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: "/crashpoints"})
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
			return k8sClient.Update(ctx, d)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setCrashPoints(true)
	t.Cleanup(func() {
		setCrashPoints(false)
		awaitOperatorRollout(context.Background(), t, false)
	})
	return awaitOperatorRollout(ctx, t, true)
}

// shortLease are the armed operator's leader election flags.
var shortLease = []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

// awaitOperatorRollout waits until the operator's Deployment runs one Pod
// of its current template, armed or not, and returns it.
func awaitOperatorRollout(ctx context.Context, t *testing.T, armed bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	support.Eventually(t, 2*time.Minute, "the operator to roll out", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(operatorDeployment.Namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d operator Pods", len(pods.Items))
		}
		p := &pods.Items[0]
		hasEnv := slices.ContainsFunc(p.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == crashpoint.EnvSteps })
		if hasEnv != armed || !podReady(p) {
			return fmt.Errorf("operator Pod %s armed=%v ready=%v", p.Name, hasEnv, podReady(p))
		}
		pod = p
		return nil
	})
	return pod
}

// TestOperatorCrashesAtEachStep crashes the operator right after each
// membership step — after creating a founder's Pod (before the others'),
// after sealing a founder, after adding a learner (before its Pod exists),
// after creating its Pod, after promoting it, after moving leadership,
// after removing a member (before its Pod is deleted), after deleting a
// Pod — while a cluster is founded with 3 members, then scales 3 -> 1 -> 3
// with a writer writing; then after each step of the recovery of a
// quorum lost for good (recording it, creating the seed, retiring an old
// Pod, recording it complete). Each restart re-derives the next step and
// the cluster converges with every acknowledged write, rebuilt once.
//
// Runs alone (no t.Parallel): it restarts the operator with crash points
// armed, and the armed operator crashes in every other test's reconciles.
func TestOperatorCrashesAtEachStep(t *testing.T) {
	ctx := context.Background()
	steps := []string{"CreateSeed", "SealSeed", "AddLearner", "CreatePod", "Promote", "MoveLeader", "RemoveMember", "DeletePod",
		"StartRecovery", "CreateRecoverySeed", "RetirePod", "CompleteRecovery"}
	operator := armCrashPoints(ctx, t, steps)

	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{}
	cluster.Namespace, cluster.Name = ns, "crashing"
	cluster.Spec.Replicas = ptr.To[int32](3)
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 3)
	cli := etcdClient(ctx, t, ns, cluster.Name)
	assertMembers(ctx, t, cli, ns, 3)
	finish := support.StartWriter(ctx, t, cli)
	for _, n := range []int32{1, 3} {
		scaleTo(ctx, t, cluster, cli, n)
	}
	finish()
	loseQuorumAndRecover(ctx, t, key, cli)

	log := env.ContainerLog(operator.Namespace, operator.Name, "manager")
	crashed := 0
	for _, step := range []string{"CreateSeed", "SealSeed", "AddLearner", "CreatePod", "Promote", "RemoveMember", "DeletePod",
		"StartRecovery", "CreateRecoverySeed", "RetirePod", "CompleteRecovery"} {
		if !strings.Contains(log, "crashpoint: crashing right after step "+step) {
			t.Errorf("the operator never crashed after %s", step)
		}
	}
	for _, step := range steps {
		crashed += strings.Count(log, "crashpoint: crashing right after step "+step)
	}
	t.Logf("the operator crashed %d times, once after each of %v it reached", crashed, steps)
}

// loseQuorumAndRecover takes two of the three members of the cluster of
// key away with their data (paused, so no membership change can happen
// between the two deletions, then their Pods deleted), with
// spec.recovery.quorumLoss Automatic: the cluster is rebuilt from the
// third, once (one recorded recovery, one seed), with every key it held.
func loseQuorumAndRecover(ctx context.Context, t *testing.T, key client.ObjectKey, cli *clientv3.Client) {
	t.Helper()
	before, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	c := getCluster(ctx, t, key)
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Recovery = &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic}
	if err := k8sClient.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	from := c.Status.ClusterID
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(pods.Items) != 3 {
		t.Fatalf("%d member Pods, want 3", len(pods.Items))
	}
	gone := pods.Items[1:]
	for _, p := range gone {
		if err := env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultPause, Namespace: p.Namespace, Pod: p.Name, Container: builder.EtcdContainerName}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range gone {
		if err := k8sClient.Delete(ctx, &gone[i], client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("deleted %s and %s with their data; %s survives", gone[0].Name, gone[1].Name, pods.Items[0].Name)
	support.Eventually(t, 5*time.Minute, "the recovery to complete", func() error {
		rec := getCluster(ctx, t, key).Status.Recovery
		if rec == nil || rec.CompletedAt == nil {
			return fmt.Errorf("status.recovery = %+v", rec)
		}
		return nil
	})
	awaitReady(ctx, t, key, 3)
	c = getCluster(ctx, t, key)
	rec := c.Status.Recovery
	t.Logf("rebuilt from %s by seed %s: cluster %s became %s at revision %d", rec.Survivor, rec.Seed, rec.FromClusterID, c.Status.ClusterID, rec.ResumedAtRevision)
	if rec.FromClusterID != from || rec.Survivor != pods.Items[0].Name || c.Status.ClusterID == from {
		t.Errorf("recovery %+v of cluster %s (now %s), want one from %s", *rec, from, c.Status.ClusterID, pods.Items[0].Name)
	}
	events := &corev1.EventList{}
	if err := k8sClient.List(ctx, events, client.InNamespace(key.Namespace)); err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range events.Items {
		if e.Reason == "RecoveryStarted" {
			started += int(max(e.Count, 1))
		}
	}
	if started != 1 {
		t.Errorf("%d RecoveryStarted events, want 1", started)
	}
	after := readRebuilt(ctx, t, etcdClient(ctx, t, key.Namespace, key.Name), "", clientv3.WithKeysOnly())
	if len(after.Kvs) != len(before.Kvs) {
		t.Errorf("the rebuilt cluster holds %d keys, the cluster held %d before the loss", len(after.Kvs), len(before.Kvs))
	}
	if etcdID := fmt.Sprintf("%x", after.Header.ClusterId); etcdID != c.Status.ClusterID {
		t.Errorf("etcd answers for cluster %s, the status says %s", etcdID, c.Status.ClusterID)
	}
}
