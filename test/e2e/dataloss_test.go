package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestTotalLossIsNotHidden deletes the only member of an emptyDir cluster:
// its data is gone. The operator does not found an empty cluster in its
// place on its own; it says DataLost, and starts anew only when the user
// annotates the EtcdCluster with the lost cluster's ID.
func TestTotalLossIsNotHidden(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lost"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 1)
	if err := k8sClient.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	lostID := cluster.Status.ClusterID
	if lostID == "" {
		t.Fatal("a Ready cluster has no cluster ID in its status")
	}
	if err := k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}

	support.Eventually(t, time.Minute, "the cluster to report DataLost", func() error {
		if err := k8sClient.Get(ctx, key, cluster); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionReady)
		if ready == nil || ready.Reason != "DataLost" {
			return fmt.Errorf("conditions %v", cluster.Status.Conditions)
		}
		return nil
	})
	t.Logf("Ready=False: %s", meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionReady).Message)
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Fatalf("the operator started Pod %s for a cluster whose data is gone", p.Name)
		}
	}
	if cluster.Status.ClusterID != lostID {
		t.Fatalf("the status forgot the lost cluster: clusterID %q, want %q", cluster.Status.ClusterID, lostID)
	}

	patch := client.MergeFrom(cluster.DeepCopy())
	metav1.SetMetaDataAnnotation(&cluster.ObjectMeta, etcdv1alpha1.AnnotationStartEmpty, lostID)
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	awaitReady(ctx, t, key, 1)
	if err := k8sClient.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	if cluster.Status.ClusterID == lostID || cluster.Status.ClusterID == "" {
		t.Fatalf("clusterID %q after starting anew, lost cluster %q", cluster.Status.ClusterID, lostID)
	}
}
