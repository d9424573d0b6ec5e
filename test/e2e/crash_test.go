package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
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
