package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// lossObserved is what the topology observes of w: no member list, and
// the quorum as the members that answer tell it.
func lossObserved(w lossWorld, edit func(*etcdv1alpha1.EtcdCluster)) observed {
	c, p, pods, claims := w.build()
	if edit != nil {
		edit(c)
	}
	o := observed{cluster: c, pods: pods, claims: claims, allClaims: claims, retiring: map[string]*corev1.Pod{}, image: "operator", now: time.Unix(1e9, 0)}
	o.loss, _ = lostQuorum(c, p, pods, claims)
	return o
}

// TestRecoveryNeedsApprovalOfThisPlan: a quorum lost for good is rebuilt
// only when the annotation names the plan this pass computes (another
// ID is refused and says which plan is current) or the cluster opted in;
// never when the cluster cannot be rebuilt so, and never when the quorum
// can come back.
func TestRecoveryNeedsApprovalOfThisPlan(t *testing.T) {
	lost := lossWorld{n: 3, noPod: []string{"q-1", "q-2"}}
	o := lossObserved(lost, nil)
	want := o.loss.recoveryPlan(o.cluster)
	if want == nil {
		t.Fatal("no plan for a quorum lost for good")
	}
	silent := lossObserved(lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, silent: []string{"q-4"}}, nil)
	silentPlanID := silent.loss.recoveryPlan(silent.cluster).ID
	approve := func(id string) func(*etcdv1alpha1.EtcdCluster) {
		return func(c *etcdv1alpha1.EtcdCluster) {
			c.Annotations = map[string]string{etcdv1alpha1.AnnotationApproveRecovery: id}
		}
	}
	tests := []struct {
		name    string
		world   lossWorld
		edit    func(*etcdv1alpha1.EtcdCluster)
		noImage bool
		want    actionKind
		refusal string
		says    []string
	}{
		{name: "not approved: the plan and how to approve it", world: lost, want: actWait,
			says: []string{want.ID, etcdv1alpha1.AnnotationApproveRecovery + "=" + want.ID, "q-0"}},
		{name: "a stale plan is refused", world: lost, edit: approve("0123456789ab"), want: actRefuse, refusal: etcdv1alpha1.ReasonStalePlan,
			says: []string{"0123456789ab", "current one, " + want.ID, "nothing changes"}},
		{name: "this plan approved", world: lost, edit: approve(want.ID), want: actStartRecovery},
		{name: "opted in", world: lost, edit: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic}
		}, want: actStartRecovery},
		{name: "opted in, a voter silent: it may hold more, the operator waits", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, silent: []string{"q-4"}}, edit: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic}
		}, want: actWait, says: []string{"q-4 keep their Pods and do not answer", "waits for them"}},
		{name: "opted in, a voter silent, and this plan approved", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, silent: []string{"q-4"}}, edit: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic}
			c.Annotations = map[string]string{etcdv1alpha1.AnnotationApproveRecovery: silentPlanID}
		}, want: actStartRecovery},
		{name: "password authentication cannot read a survivor", world: lost, edit: func(c *etcdv1alpha1.EtcdCluster) {
			approve(want.ID)(c)
			c.Spec.Security = &etcdv1alpha1.SecuritySpec{EnableAuth: true}
		}, want: actRefuse, refusal: etcdv1alpha1.ReasonRecoveryImpossible, says: []string{"password"}},
		{name: "no operator image for the seed", world: lost, edit: approve(want.ID), noImage: true, want: actRefuse, refusal: etcdv1alpha1.ReasonRecoveryImpossible, says: []string{"OPERATOR_IMAGE"}},
		{name: "a quorum that can come back is waited for, approved or not", world: lossWorld{n: 3, noPod: []string{"q-2"}, noClaim: []string{"q-0", "q-1", "q-2"}, silent: []string{"q-1"}}, edit: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic}
		}, want: actWait, says: []string{"no member answers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := lossObserved(tt.world, tt.edit)
			if tt.noImage {
				o.image = ""
			}
			a := plan(o)
			if a.kind != tt.want || a.refusal != tt.refusal {
				t.Fatalf("plan = %s (refusal %q), want %s (refusal %q)", a, a.refusal, tt.want, tt.refusal)
			}
			for _, part := range tt.says {
				if !strings.Contains(a.reason, part) {
					t.Errorf("reason %q does not say %q", a.reason, part)
				}
			}
			cond, ok := recoveredCondition(o, a)
			switch {
			case a.kind == actRefuse && (!ok || cond.Status != metav1.ConditionFalse || cond.Reason != tt.refusal):
				t.Errorf("Recovered condition = %+v (%v), want False %s", cond, ok, tt.refusal)
			case a.kind == actWait && ok:
				t.Errorf("a recovery that is not asked for has condition %+v", cond)
			}
			if a.kind != actStartRecovery || tt.world.n != lost.n {
				return
			}
			rec := a.recovery
			wantRec := etcdv1alpha1.RecoveryStatus{PlanID: want.ID, Survivor: "q-0", SurvivorID: want.SurvivorID, SurvivorRaftIndex: want.RaftIndex,
				EntriesAtRisk: want.EntriesAtRisk, FromClusterID: o.cluster.Status.ClusterID, Seed: "q-3", Retired: []string{"q-0"}}
			if rec.PlanID != wantRec.PlanID || rec.Survivor != wantRec.Survivor || rec.SurvivorID != wantRec.SurvivorID || rec.SurvivorRaftIndex != wantRec.SurvivorRaftIndex ||
				rec.EntriesAtRisk != wantRec.EntriesAtRisk || rec.FromClusterID != wantRec.FromClusterID || rec.Seed != wantRec.Seed || strings.Join(rec.Retired, ",") != "q-0" ||
				rec.ApprovedBy == "" || rec.StartedAt.IsZero() {
				t.Errorf("recovery = %+v, want %+v (a seed named after every member of the old cluster, gone ones included)", *rec, wantRec)
			}
		})
	}
}

// recoveryWorld is a cluster whose recovery was recorded: the old
// cluster 7 had q-0 (survivor), q-1 and q-2 (gone); q-3 is the seed.
type recoveryWorld struct {
	seed         bool // the seed's Pod exists
	seedDeleting bool
	seedFailed   string // the termination message of its last failed restore
	seedRestored int64  // the revision its restore reported, when it did
	serving      bool   // the seed answers the member list (cluster 9)
	switched     bool   // status.clusterID is the seed's
	retiring     []string
	terminating  bool // the retiring Pods are being deleted
}

func (w recoveryWorld) observed() observed {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To(int32(3))}}
	c.Status.ClusterID = "7"
	c.Status.Recovery = &etcdv1alpha1.RecoveryStatus{PlanID: "p1", ApprovedBy: "test", Survivor: "q-0", SurvivorID: "1", SurvivorRaftIndex: 100,
		FromClusterID: "7", Seed: "q-3", Retired: []string{"q-0"}, StartedAt: metav1.NewTime(time.Unix(1e9, 0))}
	if w.switched {
		c.Status.ClusterID = "9"
	}
	o := observed{cluster: c, pods: map[string]*corev1.Pod{}, retiring: map[string]*corev1.Pod{}, image: "operator", now: time.Unix(1e9+60, 0)}
	if w.seed {
		p := builder.MemberPod(c, builder.Member{Name: "q-3", ClusterState: builder.ClusterStateNew})
		if w.seedDeleting {
			p.DeletionTimestamp = &metav1.Time{Time: o.now}
		}
		if w.seedFailed != "" {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: builder.RestoreContainer,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: w.seedFailed}}}}
		}
		if w.seedRestored != 0 {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: builder.RestoreContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
					Message: fmt.Sprintf(`{"reason":"Restored","message":"","key":"k","size":8224,"sha256":"ab","revision":%d}`, w.seedRestored)}}}}
		}
		o.pods["q-3"] = p
	}
	if w.serving {
		o.members = []etcd.Member{{ID: 30, Name: "q-3", PeerURLs: []string{builder.PeerURL(c, "q-3")}, ClientURLs: []string{builder.ClientURL(c, "q-3")}}}
		o.clusterID, o.healthy = 9, map[uint64]bool{30: true}
	}
	for _, name := range w.retiring {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if w.terminating {
			p.DeletionTimestamp = &metav1.Time{Time: o.now}
		}
		o.retiring[name] = p
	}
	return o
}

// TestRecoverySteps walks a recorded recovery through its steps: one
// seed, created under the recorded name only while the old cluster ID is
// the cluster's; the old Pods deleted only once the status holds the
// seed's cluster ID; then complete, with the revision the seed resumed
// from.
func TestRecoverySteps(t *testing.T) {
	tests := []struct {
		name  string
		world recoveryWorld
		want  actionKind
		says  string
	}{
		{"the seed is created", recoveryWorld{retiring: []string{"q-0"}}, actCreateRecoverySeed, "seed q-3 restores the snapshot of survivor q-0"},
		{"the seed restores", recoveryWorld{seed: true, retiring: []string{"q-0"}}, actWait, "restores the snapshot"},
		{"its restore failed: said, retried", recoveryWorld{seed: true, seedFailed: `{"reason":"NotTheSurvivor","message":"not yet applied","key":"k"}`, retiring: []string{"q-0"}}, actWait, "NotTheSurvivor: not yet applied"},
		{"a seed being deleted is waited for, not doubled", recoveryWorld{seed: true, seedDeleting: true, retiring: []string{"q-0"}}, actWait, "being deleted"},
		{"the seed serves: the status records it first", recoveryWorld{seed: true, serving: true, retiring: []string{"q-0"}}, actWait, "serves the rebuilt cluster 9"},
		{"then the old Pods go", recoveryWorld{seed: true, serving: true, switched: true, retiring: []string{"q-0"}}, actRetirePod, "belongs to the old cluster 7"},
		{"while they terminate", recoveryWorld{seed: true, serving: true, switched: true, retiring: []string{"q-0"}, terminating: true}, actWait, "terminating"},
		{"then it is complete", recoveryWorld{seed: true, serving: true, switched: true, seedRestored: 42}, actCompleteRecovery, "serves and the old cluster's Pods are gone"},
		{"a seed lost after the switch is not created again", recoveryWorld{switched: true}, actCompleteRecovery, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.world.observed()
			a := plan(o)
			if a.kind != tt.want || !strings.Contains(a.reason, tt.says) {
				t.Fatalf("plan = %s, want %s saying %q", a, tt.want, tt.says)
			}
			if a.kind == actCreateRecoverySeed && (a.recovery == nil || a.member != "q-3" || a.initialCluster != "q-3="+builder.PeerURL(o.cluster, "q-3")) {
				t.Errorf("seed step = %+v, want q-3 alone, restoring the recorded recovery", a)
			}
			if cond, ok := recoveredCondition(o, a); !ok || cond.Status != metav1.ConditionUnknown {
				t.Errorf("Recovered = %+v (%v), want Unknown while it runs", cond, ok)
			}
			if a.kind == actCompleteRecovery && tt.world.seedRestored != 0 {
				rec := completedRecovery(o)
				if rec.CompletedAt == nil || rec.ResumedAtRevision != tt.world.seedRestored {
					t.Errorf("completed = %+v, want the time and revision %d", rec, tt.world.seedRestored)
				}
				o.cluster.Status.Recovery = rec
				if cond, ok := recoveredCondition(o, plan(o)); !ok || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "resuming at revision 42") {
					t.Errorf("Recovered once complete = %+v (%v)", cond, ok)
				}
				if next := plan(o); next.kind == actCreateRecoverySeed || next.kind == actCompleteRecovery {
					t.Errorf("after the recovery the topology goes on with %s, want the ordinary steps", next)
				}
			}
		})
	}
}
