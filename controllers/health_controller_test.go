package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestHealthStatusBesideTopology runs both reconcilers on a cluster whose
// members never answer (envtest runs no Pods): each writes its own
// conditions under its own field manager, neither erases the other's, and
// the health conditions say no member answers.
func TestHealthStatusBesideTopology(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probed"}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "both reconcilers' conditions", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		for _, typ := range []string{etcdv1alpha1.ConditionReady, etcdv1alpha1.ConditionProgressing, etcdv1alpha1.ConditionQuorumAvailable, etcdv1alpha1.ConditionDegraded, etcdv1alpha1.ConditionAlarm, etcdv1alpha1.ConditionMaintenance} {
			if meta.FindStatusCondition(c.Status.Conditions, typ) == nil {
				return fmt.Errorf("no %s condition yet: %v", typ, c.Status.Conditions)
			}
		}
		return nil
	})
	quorum := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumAvailable)
	if quorum.Status != metav1.ConditionFalse || quorum.Reason != etcdv1alpha1.ReasonUnreachable {
		t.Errorf("QuorumAvailable = %s/%s (%s), want False/Unreachable", quorum.Status, quorum.Reason, quorum.Message)
	}
	managers := map[string]bool{}
	for _, f := range c.ManagedFields {
		if f.Subresource == "status" {
			managers[f.Manager] = true
		}
	}
	if !managers[HealthFieldManager] || !managers[TopologyFieldManager] {
		t.Errorf("status field managers %v, want %s and %s", managers, HealthFieldManager, TopologyFieldManager)
	}
}
