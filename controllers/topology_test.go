package controllers

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestReadyReplicas checks that status.readyReplicas, the READY column,
// and the Ready condition count the same members: started voters that
// answered the pass's linearizable read and whose Pods are Ready (not
// being deleted). `make demo` once showed READY 3 while a member's Pod
// was still 0/1 Ready.
func TestReadyReplicas(t *testing.T) {
	t.Parallel()
	three := []string{"a-0", "a-1", "a-2"}
	tests := []struct {
		name   string
		world  world
		ready  int64
		status metav1.ConditionStatus
	}{
		{"all three", world{replicas: 3, voters: three, pods: three, leader: "a-0"}, 3, metav1.ConditionTrue},
		{"a Pod not Ready yet", world{replicas: 3, voters: three, pods: three, leader: "a-0", unready: []string{"a-2"}, notReadyFor: 1}, 2, metav1.ConditionFalse},
		{"a member that does not answer", world{replicas: 3, voters: three, pods: three, leader: "a-0", sick: []string{"a-1"}}, 2, metav1.ConditionFalse},
		{"a Pod being deleted", world{replicas: 3, voters: three, pods: three, leader: "a-0", deleting: []string{"a-1"}}, 2, metav1.ConditionFalse},
		{"a voter without a Pod", world{replicas: 3, voters: three, pods: []string{"a-0", "a-1"}, leader: "a-0"}, 2, metav1.ConditionFalse},
		{"a learner", world{replicas: 3, voters: []string{"a-0", "a-1"}, learners: []string{"a-2"}, pods: three, leader: "a-0"}, 2, metav1.ConditionFalse},
		{"no member answers", world{replicas: 3, noEtcd: true, pods: three}, 0, metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.world.observed()
			s := topologyStatus(o, action{kind: actNone})
			if got := s.fields["readyReplicas"]; got != tt.ready {
				t.Errorf("readyReplicas = %v, want %d", got, tt.ready)
			}
			ready := meta.FindStatusCondition(s.conditions, etcdv1alpha1.ConditionReady)
			if ready.Status != tt.status {
				t.Errorf("Ready = %s (%s), want %s", ready.Status, ready.Message, tt.status)
			}
			if says := fmt.Sprintf("%d of 3 members are ready voters", tt.ready); o.members != nil && ready.Message != says {
				t.Errorf("Ready says %q, want %q", ready.Message, says)
			}
		})
	}
}
