package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
			s := topologyStatus(o, action{kind: actNone}, nil)
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

// TestObservedGeneration checks when a pass advances
// status.observedGeneration to the cluster's generation (5; the status
// was written at 4): only once it has seen etcd's member list and taken
// its step, or shown why it refused it. Otherwise the status keeps the
// generation it had, written again: server-side apply would drop a field
// its manager leaves out.
func TestObservedGeneration(t *testing.T) {
	t.Parallel()
	three := []string{"a-0", "a-1", "a-2"}
	formed := world{replicas: 3, voters: three, pods: three, leader: "a-0"}
	tests := []struct {
		name    string
		world   world
		step    action
		actErr  error
		paused  bool
		written int64 // status.observedGeneration before the pass
		want    int64 // 0: not written
	}{
		{"stable", formed, action{kind: actNone}, nil, false, 4, 5},
		{"a step taken", formed, action{kind: actAddLearner, member: "a-3"}, nil, false, 4, 5},
		{"a step refused, the refusal shown", formed, action{kind: actRefuse, refusal: etcdv1alpha1.ReasonMemberPodRefused, reason: "quota"}, nil, false, 4, 5},
		{"a step that failed", formed, action{kind: actPromote, member: "a-2"}, errors.New("etcdserver: request timed out"), false, 4, 4},
		{"no member answers", world{replicas: 3, noEtcd: true, pods: three}, action{kind: actWait}, nil, false, 4, 4},
		{"forming, never written", world{replicas: 3, noEtcd: true}, action{kind: actCreateSeed, member: "a-0"}, nil, false, 0, 0},
		{"paused: the spec is not carried out", formed, action{kind: actNone}, nil, true, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.world.observed()
			o.cluster.Generation, o.cluster.Status.ObservedGeneration = 5, tt.written
			if tt.paused {
				o.cluster.Annotations = map[string]string{etcdv1alpha1.AnnotationPaused: "true"}
			}
			got, ok := topologyStatus(o, tt.step, tt.actErr).fields["observedGeneration"]
			switch {
			case tt.want == 0 && ok:
				t.Errorf("observedGeneration = %v, want it not written", got)
			case tt.want != 0 && got != tt.want:
				t.Errorf("observedGeneration = %v, want %d", got, tt.want)
			}
		})
	}
}

// TestRefusalOf checks which errors of a step become a refusal the status
// shows, with which reason, and that the message names the object and
// keeps the API server's words.
func TestRefusalOf(t *testing.T) {
	t.Parallel()
	createPod := action{kind: actCreateSeed, member: "a-0"}
	noClass := apierrors.NewForbidden(corev1.Resource("pods"), "a-0", errors.New("no PriorityClass with name low was found"))
	tests := []struct {
		name   string
		err    error
		reason string // "": not a refusal
		says   []string
	}{
		{"a Pod refused", refused("Pod", "a-0", noClass), etcdv1alpha1.ReasonMemberPodRefused,
			[]string{"the API server refused Pod a-0", "no PriorityClass with name low was found", "(step CreateSeed)", "spec.podTemplate"}},
		{"a claim refused", refused("PersistentVolumeClaim", "data-a-0", apierrors.NewForbidden(corev1.Resource("persistentvolumeclaims"), "data-a-0", errors.New("exceeded quota"))),
			etcdv1alpha1.ReasonMemberPodRefused, []string{"the API server refused PersistentVolumeClaim data-a-0", "exceeded quota"}},
		{"a Service invalid", fmt.Errorf("applying: %w", refused("Service", "a", apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "a", nil))),
			etcdv1alpha1.ReasonObjectRefused, []string{"the API server refused Service a", "spec.serviceTemplate"}},
		{"an Issuer refused", refused("Issuer", "a-ca", apierrors.NewBadRequest("denied by a webhook")), etcdv1alpha1.ReasonObjectRefused,
			[]string{"the API server refused Issuer a-ca", "denied by a webhook", "spec.security.tls"}},
		{"someone else's Service", &foreignObjectError{kind: "Service", name: "a", owner: "EtcdCluster a"}, etcdv1alpha1.ReasonForeignObject,
			[]string{"Service a exists and does not belong to EtcdCluster a"}},
		{"a timeout is no refusal", refused("Pod", "a-0", apierrors.NewTimeoutError("slow", 1)), "", nil},
		{"nothing", refused("Pod", "a-0", nil), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := refusalOf(createPod, tt.err)
			if ok != (tt.reason != "") || got.refusal != tt.reason {
				t.Fatalf("refusalOf(%v) = %q, %v; want reason %q", tt.err, got.refusal, ok, tt.reason)
			}
			for _, w := range tt.says {
				if !strings.Contains(got.reason, w) {
					t.Errorf("%q does not say %q", got.reason, w)
				}
			}
		})
	}
}

// TestUpdatedReplicas checks that status.updatedReplicas counts members
// running the current spec, not Pods: in a roll by surge the new member's
// Pod exists before it joins, and counting it said 3 of 3 updated while
// an old member was still to leave (TestBackupDuringRollAndReplacement
// then picked that member to harm, as it left).
func TestUpdatedReplicas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		world world
		want  int64
	}{
		{"all updated", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0"}, 3},
		{"one outdated", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0"}}, 2},
		{"a new Pod not yet a member", world{replicas: 3, voters: []string{"a-0", "a-3", "a-4"}, pods: []string{"a-0", "a-3", "a-4", "a-5"}, leader: "a-0", outdated: []string{"a-0"}}, 2},
		{"a learner counts", world{replicas: 3, voters: []string{"a-0", "a-3", "a-4"}, learners: []string{"a-5"}, pods: []string{"a-0", "a-3", "a-4", "a-5"}, leader: "a-0", outdated: []string{"a-0"}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := topologyStatus(tt.world.observed(), action{kind: actNone}, nil)
			if got := s.fields["updatedReplicas"]; got != tt.want {
				t.Errorf("updatedReplicas = %v, want %d", got, tt.want)
			}
		})
	}
}
