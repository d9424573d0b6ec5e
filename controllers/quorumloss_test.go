package controllers

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// lossWorld is a cluster "q" of n voters q-0..q-(n-1) (ID i+1) whose
// quorum is gone: no member gives the linearizable member list, q-0 gives
// its own. Pods of the members in noPod are gone, claims (with
// persistent storage) of those in noClaim; members in silent keep their
// Pod but do not answer; index gives a member's raft index (default 100).
type lossWorld struct {
	n          int
	persistent bool
	noPod      []string
	noClaim    []string
	silent     []string
	// unscheduled keep a Pod bound to no node, which does not answer.
	unscheduled []string
	index       map[string]uint64
	term        map[string]uint64
	learner     string // a learner, beside the n voters, with no Pod
	unstarted   string // a voter that never started (no name in etcd), with no Pod
	quorum      bool   // the linearizable list answered after all
	unformed    bool   // no cluster ID in the status: it never formed
	foreign     bool   // the local list comes from another cluster ID
	// otherCluster is a member that answers for another cluster ID.
	otherCluster string
	// seen gives members the raft index the last status recorded.
	seen map[string]uint64
}

func (w lossWorld) run() (quorumLoss, bool) {
	c, p, pods, claims := w.build()
	return lostQuorum(c, p, pods, claims)
}

// build is w's cluster, probe, member Pods by name and claims.
func (w lossWorld) build() (*etcdv1alpha1.EtcdCluster, probe, map[string]*corev1.Pod, map[string]bool) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To(int32(w.n))}}
	if !w.unformed {
		c.Status.ClusterID = etcd.FormatID(7)
	}
	if w.persistent {
		c.Spec.Storage.VolumeClaimTemplate = &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
	}
	p := probe{statuses: map[string]etcd.Status{}, localClusterID: 7}
	if w.foreign {
		p.localClusterID = 8
	}
	pods, claims := map[string]*corev1.Pod{}, map[string]bool{}
	var members []etcd.Member
	for i := range w.n {
		name := "q-" + strconv.Itoa(i)
		id := uint64(i + 1)
		m := etcd.Member{ID: id, Name: name, PeerURLs: []string{builder.PeerURL(c, name)}, ClientURLs: []string{builder.ClientURL(c, name)}}
		if name == w.unstarted {
			m.Name, m.ClientURLs = "", nil
		}
		members = append(members, m)
		if !slices.Contains(w.noPod, name) && name != w.unstarted {
			pods[name] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "node-1"},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
			if slices.Contains(w.unscheduled, name) {
				pods[name].Spec.NodeName, pods[name].Status = "", corev1.PodStatus{Phase: corev1.PodPending}
			}
		}
		if !slices.Contains(w.noClaim, name) {
			claims[name] = true
		}
		if pods[name] != nil && !slices.Contains(w.silent, name) && !slices.Contains(w.unscheduled, name) {
			idx, term := w.index[name], w.term[name]
			if idx == 0 {
				idx = 100
			}
			if term == 0 {
				term = 2
			}
			clusterID := uint64(7)
			if name == w.otherCluster {
				clusterID = 8
			}
			p.statuses[builder.ClientURL(c, name)] = etcd.Status{MemberID: id, ClusterID: clusterID, RaftIndex: idx, RaftTerm: term, RaftAppliedIndex: idx}
		}
	}
	if w.learner != "" {
		members = append(members, etcd.Member{ID: 99, Name: w.learner, IsLearner: true, ClientURLs: []string{builder.ClientURL(c, w.learner)}})
	}
	if w.quorum {
		p.members = members
	}
	p.local = members
	for _, name := range slices.Sorted(maps.Keys(w.seen)) {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: name, RaftIndex: w.seen[name]})
	}
	return c, p, pods, claims
}

// TestRecoveryPlan: a quorum lost for good gets a plan to rebuild from
// the most advanced survivor, with how many entries other members were
// seen holding beyond it; its ID changes with the survivor, its index and
// the gone members, and with nothing else.
func TestRecoveryPlan(t *testing.T) {
	five := lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, index: map[string]uint64{"q-3": 90, "q-4": 95}, seen: map[string]uint64{"q-0": 120, "q-3": 80}}
	planOf := func(w lossWorld) *etcdv1alpha1.RecoveryPlan {
		t.Helper()
		c, p, pods, claims := w.build()
		l, judged := lostQuorum(c, p, pods, claims)
		if !judged {
			t.Fatalf("%+v: not judged", w)
		}
		return l.recoveryPlan(c)
	}
	got := planOf(five)
	want := &etcdv1alpha1.RecoveryPlan{ID: got.ID, Survivor: "q-4", SurvivorID: "5", RaftIndex: 95, RaftTerm: 2, AppliedIndex: 95,
		HighestRaftIndexSeen: 120, EntriesAtRisk: 25, Gone: []string{
			"q-0: its Pod is gone, and its data was on an emptyDir", "q-1: its Pod is gone, and its data was on an emptyDir", "q-2: its Pod is gone, and its data was on an emptyDir"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan\n%+v, want\n%+v", *got, *want)
	}
	if len(got.ID) != 12 {
		t.Errorf("plan ID %q: want 12 hex digits", got.ID)
	}
	if again := planOf(five); again.ID != got.ID {
		t.Errorf("the same loss has plan IDs %s and %s", got.ID, again.ID)
	}
	// The survivor is ahead of every index seen: nothing is at risk.
	ahead := five
	ahead.seen = map[string]uint64{"q-0": 60}
	if p := planOf(ahead); p.EntriesAtRisk != 0 || p.HighestRaftIndexSeen != 95 {
		t.Errorf("survivor ahead: highest %d, at risk %d; want 95, 0", p.HighestRaftIndexSeen, p.EntriesAtRisk)
	}
	if p := planOf(ahead); p.ID != got.ID {
		t.Errorf("the indexes seen changed the plan ID: %s, was %s", p.ID, got.ID)
	}
	changed := map[string]lossWorld{}
	advanced := five
	advanced.index = map[string]uint64{"q-3": 90, "q-4": 96}
	changed["the survivor advanced"] = advanced
	other := five
	other.index = map[string]uint64{"q-3": 97, "q-4": 95}
	changed["another survivor"] = other
	moreGone := lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2", "q-3"}, index: five.index}
	changed["one more gone"] = moreGone
	for what, w := range changed {
		if p := planOf(w); p.ID == got.ID {
			t.Errorf("%s: the plan ID stayed %s", what, p.ID)
		}
	}
	if p := planOf(lossWorld{n: 3, noPod: []string{"q-2"}, silent: []string{"q-1"}}); p != nil {
		t.Errorf("a quorum that can come back has a plan: %+v", p)
	}
	if p := planOf(lossWorld{n: 3, noPod: []string{"q-1", "q-2"}, silent: []string{"q-0"}}); p != nil {
		t.Errorf("a loss without a survivor that answers has a plan: %+v", p)
	}
}

func TestLostQuorum(t *testing.T) {
	tests := []struct {
		name      string
		world     lossWorld
		forGood   bool
		survivors string // names, the most advanced first
		gone      string
		message   []string // parts the message must hold
	}{
		{name: "emptyDir, two of three Pods gone", world: lossWorld{n: 3, noPod: []string{"q-1", "q-2"}},
			forGood: true, survivors: "q-0", gone: "q-1,q-2",
			message: []string{"2 of 3 voting members are gone", "q-1 (its Pod is gone, and its data was on an emptyDir)", "q-0 (raft index 100, term 2, applied index 100)", "restore a backup"}},
		{name: "emptyDir, one of three Pods gone: the quorum can come back", world: lossWorld{n: 3, noPod: []string{"q-2"}, silent: []string{"q-1"}},
			survivors: "q-0", gone: "q-2"},
		{name: "a partition: Pods there, silent, is never a loss for good", world: lossWorld{n: 3, silent: []string{"q-1", "q-2"}}, survivors: "q-0",
			message: []string{"No quorum: 1 of 3 voting members answer (q-0), 2 needed.", "q-1, q-2 keep their Pods and data"}},
		{name: "claims kept: the Pods come back with their data", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1", "q-2"}}, survivors: "q-0"},
		{name: "Pods and claims gone", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1", "q-2"}, noClaim: []string{"q-1", "q-2"}},
			forGood: true, survivors: "q-0", gone: "q-1,q-2", message: []string{"its Pod and its claim " + builder.ClaimName("q-1") + " are gone"}},
		{name: "a Pod that never started on a claim being deleted: gone", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1"}, noClaim: []string{"q-1", "q-2"}, unscheduled: []string{"q-2"}},
			forGood: true, survivors: "q-0", gone: "q-1,q-2", message: []string{"q-2 (its claim " + builder.ClaimName("q-2") + " is gone or being deleted, and its Pod never started on it)"}},
		{name: "a Pod that never started on a live claim keeps its member", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1"}, noClaim: []string{"q-1"}, unscheduled: []string{"q-2"}},
			survivors: "q-0", gone: "q-1"},
		{name: "a Pod that ran on a claim being deleted keeps its member", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1"}, noClaim: []string{"q-1", "q-2"}, silent: []string{"q-2"}},
			survivors: "q-0", gone: "q-1"},
		{name: "a claim without a Pod keeps its member", world: lossWorld{n: 3, persistent: true, noPod: []string{"q-1", "q-2"}, noClaim: []string{"q-2"}},
			survivors: "q-0", gone: "q-2"},
		{name: "five, three gone: the most advanced survivor first, by index then term then ID",
			world:   lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, index: map[string]uint64{"q-3": 90, "q-4": 90}, term: map[string]uint64{"q-3": 3, "q-4": 4}},
			forGood: true, survivors: "q-4,q-3", gone: "q-0,q-1,q-2"},
		{name: "five, same index and term: the lower ID first", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}},
			forGood: true, survivors: "q-3,q-4", gone: "q-0,q-1,q-2"},
		{name: "five, two gone, one silent: a quorum can come back", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1"}, silent: []string{"q-2"}},
			survivors: "q-3,q-4", gone: "q-0,q-1"},
		{name: "a silent survivor is named", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, silent: []string{"q-4"}},
			forGood: true, survivors: "q-3", gone: "q-0,q-1,q-2", message: []string{"Not answering, data kept: q-4."}},
		{name: "a learner does not vote", world: lossWorld{n: 3, noPod: []string{"q-2"}, learner: "q-3"}, survivors: "q-0,q-1", gone: "q-2"},
		{name: "a voter that never started has no data to lose", world: lossWorld{n: 3, noPod: []string{"q-1"}, unstarted: "q-2"}, survivors: "q-0", gone: "q-1"},
		{name: "a quorum answered", world: lossWorld{n: 3, noPod: []string{"q-1", "q-2"}, quorum: true}},
		{name: "a cluster that never formed loses no quorum", world: lossWorld{n: 3, noPod: []string{"q-1", "q-2"}, unformed: true}},
		{name: "a member list of another cluster is no evidence", world: lossWorld{n: 3, noPod: []string{"q-1", "q-2"}, foreign: true}},
		{name: "a member answering for another cluster is no survivor", world: lossWorld{n: 5, noPod: []string{"q-0", "q-1", "q-2"}, otherCluster: "q-4"},
			forGood: true, survivors: "q-3", gone: "q-0,q-1,q-2", message: []string{"Not answering, data kept: q-4."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, judged := tt.world.run()
			if forGood := judged && l.forGood; forGood != tt.forGood {
				t.Errorf("for good = %v, want %v (%+v)", forGood, tt.forGood, l)
			}
			var survivors, gone []string
			for _, s := range l.survivors {
				survivors = append(survivors, s.name)
			}
			for _, g := range l.gone {
				gone = append(gone, g.name)
			}
			if got := strings.Join(survivors, ","); got != tt.survivors {
				t.Errorf("survivors = %q, want %q", got, tt.survivors)
			}
			if got := strings.Join(gone, ","); got != tt.gone {
				t.Errorf("gone = %q, want %q", got, tt.gone)
			}
			c, _, _, _ := tt.world.build()
			msg := l.message(c)
			for _, part := range tt.message {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not hold %q", msg, part)
				}
			}
		})
	}
}

// TestHealthTellsAQuorumLostForGood runs the health reconciler on a
// cluster whose member list no member gives (no quorum): while r-1 and
// r-2 keep their Pods the quorum can come back; once their Pods are gone
// (emptyDir) it is lost for good, and the condition says so.
func TestHealthTellsAQuorumLostForGood(t *testing.T) {
	w := newRequestWorld(t, nil, nil)
	c := &etcdv1alpha1.EtcdCluster{}
	if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "r"}, c); err != nil {
		t.Fatal(err)
	}
	c.Status.ClusterID = etcd.FormatID(fake.DefaultClusterID)
	if err := w.api.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	w.etcd.Fail(fake.MemberList, errors.New("etcdserver: request timed out"))
	var plan *etcdv1alpha1.RecoveryPlan
	quorum := func() metav1.Condition {
		t.Helper()
		w.pass()
		c := &etcdv1alpha1.EtcdCluster{}
		if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "r"}, c); err != nil {
			t.Fatal(err)
		}
		plan = c.Status.RecoveryPlan
		return *meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumAvailable)
	}
	if got := quorum(); got.Status != metav1.ConditionFalse || got.Reason != etcdv1alpha1.ReasonQuorumLost || !strings.Contains(got.Message, "No quorum: 3 of 3 voting members answer") {
		t.Errorf("with every Pod there: QuorumAvailable %s %s: %s", got.Status, got.Reason, got.Message)
	}
	if plan != nil {
		t.Errorf("a quorum that can come back has a recovery plan: %+v", *plan)
	}
	for _, name := range []string{"r-1", "r-2"} {
		if err := w.api.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	got := quorum()
	if got.Status != metav1.ConditionFalse || got.Reason != etcdv1alpha1.ReasonQuorumLostForGood ||
		!strings.Contains(got.Message, "2 of 3 voting members are gone with their data: r-1 (its Pod is gone, and its data was on an emptyDir), r-2") ||
		!strings.Contains(got.Message, "Survivors, the most advanced first: r-0") {
		t.Errorf("with r-1 and r-2 gone: QuorumAvailable %s %s: %s", got.Status, got.Reason, got.Message)
	}
	if plan == nil || plan.Survivor != "r-0" || len(plan.Gone) != 2 || plan.ID == "" {
		t.Errorf("with r-1 and r-2 gone: recovery plan %+v, want one from r-0 without r-1 and r-2", plan)
	}
}
