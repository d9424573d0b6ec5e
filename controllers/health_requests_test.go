package controllers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

func moveTo(m string) map[string]string {
	return map[string]string{etcdv1alpha1.AnnotationMoveLeader: m}
}

func defrag(m string) map[string]string {
	return map[string]string{etcdv1alpha1.AnnotationDefragment: m}
}

// TestPlanRequests: which step a request gives on one pass, or why it
// waits (held names the problem and how to cancel).
func TestPlanRequests(t *testing.T) {
	t.Parallel()
	quota := map[string]string{"quota-backend-bytes": "10000000"}
	tests := []struct {
		name   string
		world  healthWorld
		want   maintenanceKind
		member string
		held   []string // parts of the held notes, in order
	}{
		{name: "move to a follower", world: healthWorld{annotations: moveTo("a-1")}, want: maintMoveLeader, member: "a-1"},
		{name: "move to the leader: done already", world: healthWorld{annotations: moveTo("a-0")}, want: maintRequestDone, member: "a-0"},
		{name: "move after the leader changed: done", world: healthWorld{annotations: moveTo("a-2"), leader: 3}, want: maintRequestDone, member: "a-2"},
		{
			name: "move to an unknown member", world: healthWorld{annotations: moveTo("a-7")}, want: maintNone,
			held: []string{`The request to move leadership to "a-7" waits: no member of the cluster is named "a-7" (members: a-0, a-1, a-2); name one of them, or cancel it with: kubectl annotate etcdcluster a etcd.aenix.io/move-leader-`},
		},
		{
			name: "move to a learner", world: healthWorld{annotations: moveTo("a-2"), learner: "a-2"}, want: maintNone,
			held: []string{"a-2 is a learner, which cannot lead; it is carried out once a-2 is promoted"},
		},
		{
			name: "move to a member not started", world: healthWorld{annotations: moveTo("a-2"), unstarted: "a-2"}, want: maintNone,
			held: []string{"a-2 has not started yet"},
		},
		{
			name: "move to an unhealthy member", world: healthWorld{annotations: moveTo("a-1"), down: []string{"a-1"}}, want: maintNone,
			held: []string{"a-1 does not answer (the Degraded condition says why); it is carried out once it does"},
		},
		{
			name: "move to a member that answers but cannot read", world: healthWorld{annotations: moveTo("a-1"), sick: []string{"a-1"}}, want: maintNone,
			held: []string{"a-1 does not answer"},
		},
		{
			name: "move while paused", world: healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationMoveLeader: "a-1", etcdv1alpha1.AnnotationPaused: "true"}}, want: maintNone,
			held: []string{`The request to move leadership to "a-1" waits while the cluster is paused`},
		},
		{
			name: "move while no member answers", world: healthWorld{annotations: moveTo("a-1"), noEtcd: true}, want: maintNone,
			held: []string{"waits while no member answers"},
		},
		{name: "defragment one member", world: healthWorld{annotations: defrag("a-0")}, want: maintDefragment, member: "a-0"},
		{name: "defragment all: a follower first", world: healthWorld{annotations: defrag("all")}, want: maintDefragment, member: "a-1"},
		{name: "defragment with upkeep switched off", world: healthWorld{annotations: defrag("a-2"), off: true}, want: maintDefragment, member: "a-2"},
		{
			name: "defragment an unknown member", world: healthWorld{annotations: defrag("b-0")}, want: maintNone,
			held: []string{`The request to defragment "b-0" waits: no member of the cluster is named "b-0" (members: a-0, a-1, a-2); name one of them, or cancel it with: kubectl annotate etcdcluster a etcd.aenix.io/defragment-`},
		},
		{
			name: "defragment a learner", world: healthWorld{annotations: defrag("a-2"), learner: "a-2"}, want: maintNone,
			held: []string{"a-2 is a learner, which etcd does not defragment"},
		},
		{
			name: "defragment while another member is down", world: healthWorld{annotations: defrag("a-1"), down: []string{"a-2"}}, want: maintNone,
			held: []string{"a-2 is not healthy, and a member does not serve while it defragments"},
		},
		{
			name: "defragment all while a learner joins", world: healthWorld{annotations: defrag("all"), unstarted: "a-2"}, want: maintNone,
			held: []string{"a-2 is not healthy"},
		},
		{
			name: "defragment all, every member done: finished", world: healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationDefragment: "all", etcdv1alpha1.AnnotationDefragmented: "a-1,a-2,a-0"}},
			want: maintRequestDone,
		},
		{
			name: "progress without a request: forgotten", world: healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationDefragmented: "a-1"}},
			want: maintRequestDone,
		},
		{name: "both: the leader moves first", world: healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationMoveLeader: "a-2", etcdv1alpha1.AnnotationDefragment: "all"}}, want: maintMoveLeader, member: "a-2"},
		{
			name: "a waiting move does not hold the defragmentation", world: healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationMoveLeader: "a-2", etcdv1alpha1.AnnotationDefragment: "a-1"}, learner: "a-2"},
			want: maintDefragment, member: "a-1", held: []string{"a-2 is a learner"},
		},
		{
			name: "a waiting request does not hold NOSPACE upkeep", world: healthWorld{annotations: moveTo("x"), options: quota, alarms: []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}}, dbSize: 10000000, inUse: 9500000},
			want: maintCompact, member: "a-0", held: []string{`"x" waits`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := planMaintenance(tt.world.cluster(), tt.world.probe())
			if got.kind != tt.want || got.member != tt.member {
				t.Errorf("planMaintenance() = %s %q (%s), want %s %q", got.kind, got.member, got.reason, tt.want, tt.member)
			}
			if len(got.held) != len(tt.held) {
				t.Fatalf("held %q, want %d notes saying %q", got.held, len(tt.held), tt.held)
			}
			for i, want := range tt.held {
				if !strings.Contains(got.held[i], want) {
					t.Errorf("held[%d] = %q, want it to say %q", i, got.held[i], want)
				}
			}
			if got.acts() && got.kind != maintCompact && got.edit == nil {
				t.Errorf("%s carries out a request but edits no annotation", got.kind)
			}
		})
	}
}

// applyEdit does to annotations what requestPatch does on the API server.
func applyEdit(t *testing.T, annotations map[string]string, e requestEdit) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range annotations {
		out[k] = v
	}
	if _, ok := out[e.test]; !ok {
		t.Fatalf("the edit tests %s, which the cluster does not have", e.test)
	}
	for k, v := range e.set {
		out[k] = v
	}
	for _, k := range e.remove {
		delete(out, k)
	}
	return out
}

// TestDefragmentAllOrder runs the passes of a request to defragment
// every member, applying each step's edit as the reconciler does: each
// member once, followers first and the leader last, then the request is
// gone. A leader change half-way still puts the new leader last, and a
// pass that is repeated (the operator crashed before the edit) only
// defragments the same member again.
func TestDefragmentAllOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		leaderAt map[int]uint64 // pass -> leader from that pass on
		repeat   int            // a pass whose edit is lost once; -1: none
		want     []string
	}{
		{name: "steady leader", repeat: -1, want: []string{"a-1", "a-2", "a-0"}},
		{name: "a-2 leads after the first", leaderAt: map[int]uint64{1: 3}, repeat: -1, want: []string{"a-1", "a-0", "a-2"}},
		{name: "crash before recording a-2", repeat: 1, want: []string{"a-1", "a-2", "a-2", "a-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := healthWorld{annotations: defrag("all")}
			var got []string
			for pass := 0; pass < 10; pass++ {
				if l, ok := tt.leaderAt[pass]; ok {
					w.leader = l
				}
				step := planMaintenance(w.cluster(), w.probe())
				if step.kind == maintNone {
					break
				}
				if step.kind != maintDefragment {
					t.Fatalf("pass %d: %s %s (%s), want Defragment", pass, step.kind, step.member, step.reason)
				}
				got = append(got, step.member)
				if pass == tt.repeat {
					tt.repeat = -1
					continue
				}
				w.annotations = applyEdit(t, w.annotations, *step.edit)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("defragmented %v, want %v", got, tt.want)
			}
			if len(w.annotations) != 0 {
				t.Errorf("annotations left when done: %v", w.annotations)
			}
		})
	}
}

func TestRequestPatch(t *testing.T) {
	t.Parallel()
	c := healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationDefragment: "all", etcdv1alpha1.AnnotationDefragmented: "a-1"}}.cluster()
	step := planMaintenance(c, healthWorld{}.probe())
	b, err := requestPatch(c, *step.edit)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]string
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"op": "test", "path": "/metadata/annotations/etcd.aenix.io~1defragment", "value": "all"},
		{"op": "add", "path": "/metadata/annotations/etcd.aenix.io~1defragmented", "value": "a-1,a-2"},
	}
	if len(ops) != len(want) {
		t.Fatalf("patch %s, want %v", b, want)
	}
	for i := range want {
		for k, v := range want[i] {
			if ops[i][k] != v {
				t.Errorf("patch %s, want %v", b, want)
			}
		}
	}
}

// TestRequestCondition: a waiting request shows in the Maintenance
// condition, and its Warning event is raised once, when it begins to
// wait.
func TestRequestCondition(t *testing.T) {
	t.Parallel()
	w := healthWorld{annotations: moveTo("a-7")}
	c := w.cluster()
	step := planMaintenance(c, w.probe())
	cond := maintenanceCondition(c, step)
	if cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1alpha1.ReasonRequestHeld || !strings.Contains(cond.Message, `no member of the cluster is named "a-7"`) {
		t.Errorf("Maintenance = %s/%s %q, want False/RequestHeld naming a-7", cond.Status, cond.Reason, cond.Message)
	}
	events := heldEvents(c, step)
	if len(events) != 1 || events[0].eventType != "Warning" || events[0].reason != "RequestHeld" || events[0].message != step.held[0] {
		t.Errorf("events %+v, want one Warning RequestHeld", events)
	}
	c.Status.Conditions = []metav1.Condition{cond}
	if again := heldEvents(c, planMaintenance(c, w.probe())); len(again) != 0 {
		t.Errorf("the same wait raised events again: %+v", again)
	}

	acting := healthWorld{annotations: map[string]string{etcdv1alpha1.AnnotationMoveLeader: "a-7", etcdv1alpha1.AnnotationDefragment: "a-1"}}
	cond = maintenanceCondition(acting.cluster(), planMaintenance(acting.cluster(), acting.probe()))
	if cond.Status != metav1.ConditionTrue || cond.Reason != string(maintDefragment) || !strings.Contains(cond.Message, `"a-7" waits`) {
		t.Errorf("Maintenance = %s/%s %q, want True/Defragment that names the waiting move", cond.Status, cond.Reason, cond.Message)
	}
}
