package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestInstalledOperatorReconciles: the operator installed from config/,
// running as a pod with its own ServiceAccount, reconciles the seed's full
// example and tells the user that emptyDir is ignored.
func TestInstalledOperatorReconciles(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	objs := support.ReadObjects(t, env.Root+"/examples/all-fields-seed.yaml")
	for _, o := range objs {
		o.SetNamespace(ns)
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cluster := &etcdv1alpha1.EtcdCluster{}
	support.Eventually(t, time.Minute, "the operator to report ConfigurationWarning=True (EmptyDirIgnored)", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "test"}, cluster); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionConfigurationWarning)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1alpha1.ReasonEmptyDirIgnored {
			return fmt.Errorf("conditions: %v", cluster.Status.Conditions)
		}
		return nil
	})
	if cluster.Status.Selector != etcdv1alpha1.LabelCluster+"=test" {
		t.Errorf("status.selector = %q", cluster.Status.Selector)
	}
}
