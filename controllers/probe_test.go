package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// TestMostAdvanced checks that the member list is asked of the member
// furthest along: a seed wiped and founding a cluster of its own again
// (same IDs, a short log) or a partitioned member that raised its term is
// asked last.
func TestMostAdvanced(t *testing.T) {
	t.Parallel()
	statuses := map[string]etcd.Status{
		"a-0": {RaftTerm: 2, RaftIndex: 4},    // wiped seed, founded anew
		"a-1": {RaftTerm: 3, RaftIndex: 1200}, // the leader's view
		"a-2": {RaftTerm: 9, RaftIndex: 1100}, // cut off, campaigning
		"a-3": {RaftTerm: 3, RaftIndex: 1200},
	}
	got := mostAdvanced(statuses)
	if want := []string{"a-1", "a-3", "a-2", "a-0"}; !slices.Equal(got, want) {
		t.Errorf("mostAdvanced() = %v, want %v", got, want)
	}
}

// TestProbeListsAlarmsOnlyWhenReported: listing the alarms is a raft
// proposal (a log entry at every probe of every cluster), so a probe asks
// for the list only when a member's status reports an alarm.
func TestProbeListsAlarmsOnlyWhenReported(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}
	members := []etcd.Member{{ID: 1, Name: "a-0", ClientURLs: []string{builder.ClientURL(c, "a-0")}}, {ID: 2, Name: "a-1", ClientURLs: []string{builder.ClientURL(c, "a-1")}}}
	for _, tc := range []struct {
		name   string
		alarms []etcd.Alarm
	}{
		{"no alarm", nil},
		{"NOSPACE", []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}}},
	} {
		fc := fake.New(members...)
		for _, a := range tc.alarms {
			fc.WithAlarm(a)
		}
		newClient := func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
			return unclosable{fc}, nil
		}
		p := probeMembers(context.Background(), newClient, c, []string{builder.ClientURL(c, "a-0"), builder.ClientURL(c, "a-1")}, true)
		asked := slices.ContainsFunc(fc.Calls(), func(call fake.Call) bool { return call.Method == fake.Alarms })
		if asked != (len(tc.alarms) > 0) || !slices.Equal(p.alarms, tc.alarms) || p.alarmsErr != nil {
			t.Errorf("%s: alarms listed %v, got %v (%v)", tc.name, asked, p.alarms, p.alarmsErr)
		}
	}
}

// TestProbeAsksNoMemberListOfALeaderlessMinority: a linearizable member
// list needs a leader; asked of members that know none, it waits out the
// call timeout on each (10 s a pass for the two survivors of five). When
// fewer than a quorum of the voters answer and none knows a leader, the
// probe takes the local list at once; when a quorum answers (an election
// under way), it still asks.
func TestProbeAsksNoMemberListOfALeaderlessMinority(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}
	var all []string
	for i := range 5 {
		all = append(all, builder.ClientURL(c, fmt.Sprintf("a-%d", i)))
	}
	for _, tc := range []struct {
		name      string
		answering int
		leader    uint64
		wantList  bool
	}{
		{"two of five, no leader", 2, 0, false},
		{"three of five, no leader", 3, 0, true},
		{"two of five, a leader known", 2, 5, true},
	} {
		var members []etcd.Member
		for i := range 5 {
			m := etcd.Member{ID: uint64(i + 1), Name: fmt.Sprintf("a-%d", i)}
			if i >= 5-tc.answering {
				m.ClientURLs = []string{all[i]}
			}
			members = append(members, m)
		}
		fc := fake.New(members...).WithLeader(tc.leader)
		newClient := func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
			return unclosable{fc}, nil
		}
		p := probeMembers(context.Background(), newClient, c, all, false)
		asked := len(fc.CallsOf(fake.MemberList)) > 0
		if asked != tc.wantList {
			t.Errorf("%s: member list asked %v, want %v", tc.name, asked, tc.wantList)
		}
		if !tc.wantList && (p.members != nil || len(p.local) != 5 || p.err == nil || !strings.Contains(p.err.Error(), "2 of 5 voting members answer")) {
			t.Errorf("%s: members %v, local %v, err %v; want the local list of 5 and why", tc.name, p.members, p.local, p.err)
		}
	}
}
