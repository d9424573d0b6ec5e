package controllers

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// healthWorld is a fixture of one probe of cluster "a" with members a-0,
// a-1, a-2 (IDs 1, 2, 3; a-0 leads): the members that did not answer, the
// alarms and the database sizes.
type healthWorld struct {
	down    []string // no status, no read
	sick    []string // status, but no linearizable read
	alarms  []etcd.Alarm
	dbSize  int64 // every member's database
	inUse   int64 // every member's live data
	small   map[string]bool
	noEtcd  bool
	foreign string
	options map[string]string
	off     bool
	// annotations are the cluster's; learner is a member that is a
	// learner, unstarted one added but not started; leader, when set,
	// leads instead of a-0 (ID 1).
	annotations map[string]string
	learner     string
	unstarted   string
	leader      uint64
}

func (w healthWorld) cluster() *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Annotations: w.annotations}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Options: w.options}}
	if w.off {
		c.Spec.Maintenance = &etcdv1alpha1.MaintenanceSpec{Defragmentation: ptr.To(false)}
	}
	c.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "a-0", ID: "1", Healthy: true}}
	return c
}

func (w healthWorld) probe() probe {
	leader := cmp.Or(w.leader, 1)
	p := probe{statuses: map[string]etcd.Status{}, errs: map[string]error{}, health: map[uint64]error{}, clusterID: 9, leader: leader, alarms: w.alarms}
	if w.noEtcd {
		p.err = errors.New("connection refused")
		return p
	}
	for i, name := range []string{"a-0", "a-1", "a-2"} {
		id := uint64(i + 1)
		ep := "http://" + name + ".a-headless.ns.svc:2379"
		if name == w.unstarted {
			p.members = append(p.members, etcd.Member{ID: id, PeerURLs: []string{"http://" + name + ".a-headless.ns.svc:2380"}, IsLearner: true})
			continue
		}
		p.members = append(p.members, etcd.Member{ID: id, Name: name, ClientURLs: []string{ep}, IsLearner: name == w.learner})
		if slices.Contains(w.down, name) {
			p.errs[ep] = errors.New("context deadline exceeded")
			p.health[id] = errors.New("status of endpoint " + ep + ": context deadline exceeded")
			continue
		}
		st := etcd.Status{Endpoint: ep, MemberID: id, ClusterID: 9, Leader: leader, IsLearner: name == w.learner, Version: "3.6.16", DBSize: w.dbSize, DBSizeInUse: w.inUse}
		if w.small[name] {
			st.DBSize, st.DBSizeInUse = 1<<20, 1<<20
		}
		if name == w.foreign {
			st.ClusterID = 7
		}
		p.statuses[ep] = st
		p.health[id] = nil
		if slices.Contains(w.sick, name) {
			p.health[id] = errors.New("etcdserver: no leader")
		}
	}
	return p
}

func TestAssess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		world   healthWorld
		want    map[string]string // condition type -> status/reason
		message map[string]string // condition type -> part of its message
	}{
		{"all healthy", healthWorld{},
			map[string]string{"QuorumAvailable": "True/QuorumHealthy", "Degraded": "False/AllMembersHealthy", "Alarm": "False/NoAlarms"}, nil},
		{"one member cut off: degraded, named", healthWorld{down: []string{"a-1"}},
			map[string]string{"QuorumAvailable": "True/QuorumHealthy", "Degraded": "True/MembersUnhealthy"},
			map[string]string{"Degraded": "a-1: status of endpoint http://a-1.a-headless.ns.svc:2379: context deadline exceeded"}},
		{"two of three down: quorum lost", healthWorld{down: []string{"a-1"}, sick: []string{"a-0"}},
			map[string]string{"QuorumAvailable": "False/QuorumLost", "Degraded": "True/MembersUnhealthy"},
			map[string]string{"QuorumAvailable": "1 of 3 voting members answer linearizable reads; 2 needed"}},
		{"nobody answers: no stale health", healthWorld{noEtcd: true},
			map[string]string{"QuorumAvailable": "False/Unreachable", "Degraded": "True/Unreachable", "Alarm": "Unknown/Unreachable"}, nil},
		{"NOSPACE", healthWorld{alarms: []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}}},
			map[string]string{"Alarm": "True/NOSPACE"}, map[string]string{"Alarm": "a-1 raised NOSPACE"}},
		{"CORRUPT and NOSPACE", healthWorld{alarms: []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}, {MemberID: 3, Type: etcd.AlarmCorrupt}}},
			map[string]string{"Alarm": "True/CORRUPT_NOSPACE"}, map[string]string{"Alarm": "the operator does not disarm it"}},
		{"another cluster's member", healthWorld{foreign: "a-2"},
			map[string]string{"Degraded": "True/ClusterIDMismatch"}, map[string]string{"Degraded": "reports cluster 7, not 9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := assess(tt.world.cluster(), tt.world.probe(), nil, time.Now())
			for typ, want := range tt.want {
				c := meta.FindStatusCondition(r.conditions, typ)
				if c == nil || string(c.Status)+"/"+c.Reason != want {
					t.Errorf("%s = %v, want %s", typ, c, want)
				}
			}
			for typ, want := range tt.message {
				if c := meta.FindStatusCondition(r.conditions, typ); c == nil || !strings.Contains(c.Message, want) {
					t.Errorf("%s message = %v, want it to say %q", typ, c, want)
				}
			}
			for _, m := range r.members {
				if m.Healthy && (slices.Contains(tt.world.down, m.Name) || slices.Contains(tt.world.sick, m.Name) || tt.world.noEtcd) {
					t.Errorf("member %s reported healthy", m.Name)
				}
				if !m.Healthy && m.LastError == "" {
					t.Errorf("member %s unhealthy without a reason", m.Name)
				}
			}
			if tt.world.noEtcd && (len(r.members) != 1 || r.members[0].Name != "a-0" || r.members[0].Healthy) {
				t.Errorf("unreachable: members %+v, want a-0 listed as unhealthy", r.members)
			}
		})
	}
}

func TestPlanMaintenance(t *testing.T) {
	t.Parallel()
	noSpace := []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}}
	quota := map[string]string{"quota-backend-bytes": "10000000"}
	tests := []struct {
		name   string
		world  healthWorld
		want   maintenanceKind
		member string
	}{
		{"nothing to do", healthWorld{dbSize: 200 << 20, inUse: 190 << 20}, maintNone, ""},
		{"fragmented: a follower first", healthWorld{dbSize: 200 << 20, inUse: 20 << 20}, maintDefragment, "a-1"},
		{"fragmented but small: left alone", healthWorld{dbSize: 2 << 20, inUse: 100 << 10}, maintNone, ""},
		{"fragmented, the leader last", healthWorld{dbSize: 200 << 20, inUse: 20 << 20, small: map[string]bool{"a-1": true, "a-2": true}}, maintDefragment, "a-0"},
		{"NOSPACE, live data near the quota: compact", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 9500000}, maintCompact, "a-0"},
		{"NOSPACE after compaction: defragment even small databases", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 100000}, maintDefragment, "a-1"},
		{"NOSPACE, room again: disarm", healthWorld{options: quota, alarms: noSpace, dbSize: 100000, inUse: 90000}, maintDisarm, "2"},
		// etcd compares the database file with the quota: disarmed while
		// the file still fills it, the alarm comes straight back.
		{"NOSPACE, compacted, the file still at the quota with 30% free: defragment", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 7000000}, maintDefragment, "a-1"},
		{"NOSPACE, the file near the quota with 30% free: defragment", healthWorld{options: quota, alarms: noSpace, dbSize: 9200000, inUse: 6400000}, maintDefragment, "a-1"},
		// Live data under the compaction threshold, history and free
		// space above it (how the file grew decides): defragmented after
		// a compaction (compactFirst), or the history would fill the
		// quota again at once.
		{"NOSPACE, live data and history at 78%, 22% free: compact, then defragment", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 7800000}, maintDefragment, "a-1"},
		{"NOSPACE, every file well below the quota: disarm", healthWorld{options: quota, alarms: noSpace, dbSize: 8500000, inUse: 6000000}, maintDisarm, "2"},
		{"NOSPACE with a member down: wait", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 100000, down: []string{"a-2"}}, maintWait, "a-2"},
		{"switched off", healthWorld{options: quota, alarms: noSpace, dbSize: 10000000, inUse: 100000, off: true}, maintNone, ""},
		{"CORRUPT is never disarmed", healthWorld{alarms: []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmCorrupt}}, dbSize: 100000, inUse: 90000}, maintNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := planMaintenance(tt.world.cluster(), tt.world.probe())
			if got.kind != tt.want || got.member != tt.member {
				t.Errorf("planMaintenance() = %s %s (%s), want %s %s", got.kind, got.member, got.reason, tt.want, tt.member)
			}
			noSpace := slices.ContainsFunc(tt.world.alarms, func(a etcd.Alarm) bool { return a.Type == etcd.AlarmNoSpace })
			if want := noSpace && (got.kind == maintDefragment || got.kind == maintDisarm); got.compactFirst != want {
				t.Errorf("planMaintenance() = %s with compactFirst %v, want %v: under NOSPACE, and only then, defragmenting and disarming compact first", got.kind, got.compactFirst, want)
			}
		})
	}
}

func TestMinDefragmentationSize(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Maintenance: &etcdv1alpha1.MaintenanceSpec{MinDefragmentationSize: ptr.To(resource.MustParse("1Mi"))}}}
	p := healthWorld{dbSize: 2 << 20, inUse: 100 << 10}.probe()
	if got := planMaintenance(c, p); got.kind != maintDefragment {
		t.Errorf("with minDefragmentationSize 1Mi a 2Mi database 95%% free is not defragmented: %s", got.kind)
	}
}

func TestHealthEvents(t *testing.T) {
	t.Parallel()
	old := []etcdv1alpha1.MemberStatus{
		{Name: "a-0", Healthy: true, Role: etcdv1alpha1.MemberRoleLeader},
		{Name: "a-1", Healthy: true},
		{Name: "a-2", Healthy: false, Alarms: []string{"NOSPACE"}},
	}
	cur := []etcdv1alpha1.MemberStatus{
		{Name: "a-0", Healthy: true},
		{Name: "a-1", Healthy: false, LastError: "timeout", Role: etcdv1alpha1.MemberRoleLeader, Alarms: []string{"CORRUPT"}},
		{Name: "a-2", Healthy: true},
		{Name: "a-3", Healthy: false},
	}
	var got []string
	for _, e := range healthEvents(old, cur) {
		got = append(got, e.reason+": "+e.message)
	}
	want := []string{
		"MemberUnhealthy: Member a-1 became unhealthy: timeout",
		"AlarmRaised: Member a-1 raised CORRUPT",
		"MemberRecovered: Member a-2 is healthy again",
		"AlarmCleared: The NOSPACE alarm of member a-2 is cleared",
		"LeaderChanged: Leadership moved from a-0 to a-1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestKeepProbeTimes: a probe that finds a member as the status says
// keeps its lastProbeTime for up to five minutes, so nothing is written; any
// change, or an older time, takes this probe's time.
func TestKeepProbeTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	member := func(probed time.Duration, healthy bool) etcdv1alpha1.MemberStatus {
		return etcdv1alpha1.MemberStatus{Name: "a-0", ID: "1", Healthy: healthy, DBSize: 4096, LastProbeTime: &metav1.Time{Time: at.Add(-probed)}}
	}
	tests := []struct {
		name     string
		was, now etcdv1alpha1.MemberStatus
		keep     bool
	}{
		{"unchanged, probed 30s ago: kept", member(30*time.Second, true), member(0, true), true},
		{"unchanged, probed 4m59s ago: kept", member(5*time.Minute-time.Second, true), member(0, true), true},
		{"unchanged, probed five minutes ago: moves", member(5*time.Minute, true), member(0, true), false},
		{"health changed: moves", member(30*time.Second, true), member(0, false), false},
		{"another member: moves", etcdv1alpha1.MemberStatus{Name: "a-1", ID: "2", LastProbeTime: &metav1.Time{Time: at}}, member(0, true), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := keepProbeTimes([]etcdv1alpha1.MemberStatus{tt.was}, []etcdv1alpha1.MemberStatus{tt.now}, at)[0]
			want := tt.now.LastProbeTime.Time
			if tt.keep {
				want = tt.was.LastProbeTime.Time
			}
			if !got.LastProbeTime.Time.Equal(want) {
				t.Errorf("lastProbeTime %s, want %s", got.LastProbeTime.Time, want)
			}
		})
	}
}

// TestNoQuorumKeepsRaftProgress: while no quorum gives the member list,
// each member keeps the raft progress a probe last saw, and one that
// still answers for the cluster gives its own: the highest index the
// cluster reached stays known for a recovery plan.
func TestNoQuorumKeepsRaftProgress(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}
	c.Status.ClusterID = etcd.FormatID(9)
	c.Status.Members = []etcdv1alpha1.MemberStatus{
		{Name: "a-0", ID: "1", Healthy: true, RaftTerm: 2, RaftIndex: 100, DBSize: 4096},
		{Name: "a-1", ID: "2", Healthy: true, RaftTerm: 2, RaftIndex: 120},
		{Name: "a-2", ID: "3", Healthy: true, RaftTerm: 2, RaftIndex: 110},
	}
	p := probe{err: errors.New("etcdserver: request timed out"), statuses: map[string]etcd.Status{
		"a-0": {MemberID: 1, ClusterID: 9, RaftTerm: 3, RaftIndex: 105},
		"a-2": {MemberID: 3, ClusterID: 8, RaftTerm: 5, RaftIndex: 999}, // another cluster's answer
	}}
	got := map[string]string{}
	for _, m := range memberStatuses(c, p, time.Now()) {
		if m.Healthy || m.LastError == "" || m.DBSize != 0 {
			t.Errorf("%s: healthy %v, lastError %q, dbSize %d: want unhealthy, with a reason, nothing else kept", m.Name, m.Healthy, m.LastError, m.DBSize)
		}
		got[m.Name] = fmt.Sprintf("%d/%d", m.RaftTerm, m.RaftIndex)
	}
	want := map[string]string{"a-0": "3/105", "a-1": "2/120", "a-2": "2/110"}
	if !maps.Equal(got, want) {
		t.Errorf("raft term/index = %v, want %v", got, want)
	}
}
