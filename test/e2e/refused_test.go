package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestRefusedSeedPodForms applies a cluster on claims whose Pods name a
// PriorityClass that does not exist yet, as the seed's full example does
// when applied first: the seed's claim is created, its Pod refused. The
// refusal shows in the cluster's conditions; once the PriorityClass exists
// the cluster forms and grows to 3 members. (The operator once took the
// unused claim for member data and started the seed as a member of an
// existing cluster of itself alone, which crash-looped for good.)
func TestRefusedSeedPodForms(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	class := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-low"}, Value: 1000}
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:    ptr.To[int32](3),
			Storage:     claimsOf(),
			PodTemplate: etcdv1alpha1.PodTemplate{Spec: etcdv1alpha1.PodSpec{PriorityClassName: class.Name}},
		},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionReady, metav1.ConditionFalse, "refused Pod refused-0", class.Name)
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-refused-0"}, claim); err != nil {
		t.Fatalf("the seed's claim: %v", err)
	}

	if err := k8sClient.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), class) })
	awaitReady(ctx, t, key, 3)
	cli := etcdClient(ctx, t, ns, key.Name)
	if _, err := cli.Put(ctx, "/e2e/formed", "yes"); err != nil {
		t.Fatal(err)
	}
	assertMembers(ctx, t, cli, ns, 3)
}
