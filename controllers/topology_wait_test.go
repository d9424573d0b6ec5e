package controllers

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

func TestNextWait(t *testing.T) {
	t.Parallel()
	now := time.Unix(10000, 0)
	podsStarting := action{kind: actWait, member: "c-0", reason: "no member answers yet"}
	for _, tc := range []struct {
		name      string
		prev      waiting
		step      action
		wait      time.Duration
		want      time.Duration
		wantSince time.Time
	}{
		{"a new wait", waiting{}, podsStarting, waitRequeue, waitRequeue, now},
		{"the same wait for 10s", waiting{actWait, "c-0", now.Add(-10 * time.Second)}, podsStarting, waitRequeue, 5 * time.Second, now.Add(-10 * time.Second)},
		{"the same wait for 2s", waiting{actWait, "c-0", now.Add(-2 * time.Second)}, podsStarting, waitRequeue, waitRequeue, now.Add(-2 * time.Second)},
		{"the same wait for an hour", waiting{actWait, "c-0", now.Add(-time.Hour)}, podsStarting, waitRequeue, maxWaitRequeue, now.Add(-time.Hour)},
		{"a wait on another member starts over", waiting{actWait, "c-1", now.Add(-time.Hour)}, podsStarting, waitRequeue, waitRequeue, now},
		{"a blocked step waits the same way", waiting{actBlocked, "c-0", now.Add(-time.Minute)}, action{kind: actBlocked, member: "c-0"}, waitRequeue, maxWaitRequeue, now.Add(-time.Minute)},
		{"never past the wait's end", waiting{actWait, "c-0", now.Add(-time.Hour)}, action{kind: actWait, member: "c-0", until: now.Add(3 * time.Second)}, waitRequeue, 3 * time.Second, now.Add(-time.Hour)},
		{"a wait's end passed", waiting{actWait, "c-0", now.Add(-time.Hour)}, action{kind: actWait, member: "c-0", until: now.Add(-time.Second)}, waitRequeue, stepRequeue, now.Add(-time.Hour)},
		{"a learner etcd does not promote yet keeps its wait", waiting{actPromote, "c-3", now.Add(-time.Minute)}, action{kind: actPromote, member: "c-3"}, waitRequeue, waitRequeue, time.Time{}},
		{"a step", waiting{actWait, "c-0", now.Add(-time.Hour)}, action{kind: actCreatePod, member: "c-0"}, stepRequeue, stepRequeue, time.Time{}},
		{"nothing to do, a member not ready for a minute (lookAgain)", waiting{actNone, "", now.Add(-time.Minute)}, action{kind: actNone}, waitRequeue, maxWaitRequeue, now.Add(-time.Minute)},
		{"nothing to do and all ready: no requeue", waiting{}, action{kind: actNone}, 0, 0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, next := nextWait(tc.prev, tc.step, tc.wait, now)
			if got != tc.want || !next.since.Equal(tc.wantSince) {
				t.Errorf("nextWait = %s, waiting since %s; want %s since %s", got, next.since, tc.want, tc.wantSince)
			}
		})
	}
}

func TestLookAgain(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)}}
	o := observed{cluster: c, pods: map[string]*corev1.Pod{}, healthy: map[uint64]bool{}}
	for i, name := range []string{"c-0", "c-1", "c-2"} {
		o.members = append(o.members, etcd.Member{ID: uint64(i + 1), Name: name})
		o.pods[name] = &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		o.healthy[uint64(i+1)] = true
	}
	if lookAgain(o, action{kind: actNone}) {
		t.Error("3 of 3 ready voters, nothing to do: looked at again")
	}
	o.healthy[3] = false // its first probe after a roll failed; its Pod is Ready
	if !lookAgain(o, action{kind: actNone}) {
		t.Error("2 of 3 ready voters, nothing to do: not looked at again, and no watch reports the member answering")
	}
	if lookAgain(o, action{kind: actCreatePod, member: "c-3"}) {
		t.Error("a step asks for its own wait")
	}
}

// TestFoundingOnWatches: a new cluster whose member Pods have no address
// yet waits on the Pod watch alone; one with an addressed Pod, a formed
// one, a step that acts or a wait with an end keeps its requeue.
func TestFoundingOnWatches(t *testing.T) {
	t.Parallel()
	world := func(ip, clusterID string) observed {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Status.ClusterID = clusterID
		return observed{cluster: c, pods: map[string]*corev1.Pod{"c-0": {Status: corev1.PodStatus{PodIP: ip}}}}
	}
	wait := action{kind: actWait, reason: "founders starting"}
	for _, tc := range []struct {
		name string
		o    observed
		step action
		want bool
	}{
		{"new, Pods without an address, waiting", world("", ""), wait, true},
		{"new, nothing to do", world("", ""), action{kind: actNone}, true},
		{"new, a Pod with an address: its etcd may answer", world("10.0.0.1", ""), wait, false},
		{"formed: a claim may go, which no watch reports", world("", "9"), wait, false},
		{"no Pod yet: it may wait for the certificates", observed{cluster: &etcdv1alpha1.EtcdCluster{}, pods: map[string]*corev1.Pod{}}, wait, false},
		{"a step that acts", world("", ""), action{kind: actCreateSeed}, false},
		{"a wait with an end", world("", ""), action{kind: actWait, until: time.Unix(1, 0)}, false},
	} {
		if got := foundingOnWatches(tc.o, tc.step); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLearnerRequeue: a learner etcd does not let be promoted yet is
// asked again soon while its Pod is new, less often as it ages.
func TestLearnerRequeue(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		age  time.Duration
		want time.Duration
	}{
		{0, stepRequeue},
		{time.Second, stepRequeue},
		{4 * time.Second, time.Second},
		{time.Minute, waitRequeue},
	} {
		o := observed{now: now, pods: map[string]*corev1.Pod{"a-3": {ObjectMeta: metav1.ObjectMeta{Name: "a-3", CreationTimestamp: metav1.NewTime(now.Add(-tc.age))}}}}
		if got := learnerRequeue(o, "a-3"); got != tc.want {
			t.Errorf("learner Pod %s old: requeue %s, want %s", tc.age, got, tc.want)
		}
	}
	if got := learnerRequeue(observed{now: now}, "a-3"); got != waitRequeue {
		t.Errorf("no Pod: requeue %s, want %s", got, waitRequeue)
	}
}

func TestReconfigRequeue(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pod := func(name string, started time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if started >= 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-started))}}}}
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		started []time.Duration // how long ago each member's etcd started; <0: not running
		want    time.Duration
	}{
		{"no member runs", []time.Duration{-1}, waitRequeue},
		{"youngest started a second ago", []time.Duration{time.Hour, time.Second}, 4 * time.Second},
		{"youngest nearly 5 s old", []time.Duration{4800 * time.Millisecond, time.Hour}, stepRequeue},
		{"just past 5 s: its connection may come later", []time.Duration{6 * time.Second}, stepRequeue},
		{"every member long started: another cause", []time.Duration{11 * time.Second, time.Hour, -1}, waitRequeue},
	} {
		o := observed{now: now, pods: map[string]*corev1.Pod{}}
		for i, d := range tc.started {
			name := fmt.Sprintf("a-%d", i)
			o.pods[name] = pod(name, d)
		}
		if got := reconfigRequeue(o); got != tc.want {
			t.Errorf("%s: requeue %s, want %s", tc.name, got, tc.want)
		}
	}
}
