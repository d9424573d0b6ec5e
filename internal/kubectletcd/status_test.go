package kubectletcd

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with what the code prints")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (run go test -update to write it): %v", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run go test -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// healthyCluster is a formed three-member cluster, every member healthy.
func healthyCluster() ([]client.Object, *clusterWrapper) {
	c := newCluster("main").formed("3.6.5").
		condition(etcdv1alpha1.ConditionInitialized, metav1.ConditionTrue, etcdv1alpha1.ReasonFormed, "Cluster cdf818194e3a8c32 formed", 26*time.Hour).
		condition(etcdv1alpha1.ConditionReady, metav1.ConditionTrue, etcdv1alpha1.ReasonAllMembersReady, "3 of 3 members are ready voters", 3*time.Hour).
		condition(etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy, "3 of 3 voting members answer linearizable reads; quorum is 2", 3*time.Hour).
		condition(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, "Membership matches spec.replicas", 3*time.Hour).
		condition(etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse, etcdv1alpha1.ReasonAllMembersHealthy, "", 3*time.Hour).
		member(healthyMember("main-0", "8e9e05c52164694d", etcdv1alpha1.MemberRoleLeader, 184467)).
		member(healthyMember("main-1", "91bc3c398fb3c146", etcdv1alpha1.MemberRoleFollower, 184467)).
		member(healthyMember("main-2", "fd422379fda50e48", etcdv1alpha1.MemberRoleFollower, 184466))
	return []client.Object{
		newPod("main", "main-0").node("worker-a").obj(),
		newPod("main", "main-1").node("worker-b").restarts(1).obj(),
		newPod("main", "main-2").node("worker-c").obj(),
		newPod("other", "other-0").node("worker-a").obj(),
	}, c
}

func TestStatusGolden(t *testing.T) {
	t.Parallel()

	healthyPods, healthy := healthyCluster()

	// A fourth member joins as a learner.
	learnerPods, learner := healthyCluster()
	learner.replicas(4)
	learner.Generation = 3
	learner.Status.ObservedGeneration = 3
	learner.Status.Conditions[1] = metav1.Condition{Type: etcdv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonNotReady, Message: "3 of 4 members are ready voters: main-3 is a learner", LastTransitionTime: ago(40 * time.Second)}
	learner.Status.Conditions[3] = metav1.Condition{Type: etcdv1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Promote", Message: "Promote learner main-3 once it has caught up with the leader (raft index 1201 of 184467)", LastTransitionTime: ago(40 * time.Second)}
	l := healthyMember("main-3", "2b0c9a1e5d6f7a88", etcdv1alpha1.MemberRoleLearner, 1201)
	l.DBSize, l.DBSizeInUse = 4_096_000, 4_096_000
	learner.member(l)
	learner.Status.ReadyReplicas = 3
	learnerPods = append(learnerPods, newPod("main", "main-3").node("worker-d").obj())

	// main-2 does not answer and its Pod crash-loops; main-0 is out of space.
	unhealthyPods := []client.Object{
		newPod("main", "main-0").node("worker-a").obj(),
		newPod("main", "main-1").node("worker-b").obj(),
		newPod("main", "main-2").node("worker-c").restarts(7).waiting("CrashLoopBackOff").obj(),
	}
	probed := ago(12 * time.Second)
	unhealthy := newCluster("main").formed("3.6.5").
		condition(etcdv1alpha1.ConditionInitialized, metav1.ConditionTrue, etcdv1alpha1.ReasonFormed, "Cluster cdf818194e3a8c32 formed", 26*time.Hour).
		condition(etcdv1alpha1.ConditionReady, metav1.ConditionFalse, etcdv1alpha1.ReasonNotReady, "2 of 3 members are ready voters: main-2 is unhealthy", 4*time.Minute).
		condition(etcdv1alpha1.ConditionQuorumAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy, "2 of 3 voting members answer linearizable reads; quorum is 2", 3*time.Hour).
		condition(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonMembersUnhealthy, "main-2: context deadline exceeded; it is replaced if still unhealthy 5m0s after it became so", 4*time.Minute).
		condition(etcdv1alpha1.ConditionAlarm, metav1.ConditionTrue, "NOSPACE", "main-0 raised NOSPACE: the cluster takes no writes until space is freed and the alarm disarmed", time.Minute)
	m0 := healthyMember("main-0", "8e9e05c52164694d", etcdv1alpha1.MemberRoleLeader, 184467)
	m0.Alarms = []string{"NOSPACE"}
	m0.DBSize, m0.DBSizeInUse = 2_147_483_648, 2_140_000_000
	unhealthy.member(m0).
		member(healthyMember("main-1", "91bc3c398fb3c146", etcdv1alpha1.MemberRoleFollower, 184467)).
		member(etcdv1alpha1.MemberStatus{Name: "main-2", ID: "fd422379fda50e48", Role: etcdv1alpha1.MemberRoleFollower, LastError: "context deadline exceeded", LastProbeTime: &probed})

	// A new cluster: no status yet, the seed's Pod is pending.
	bootstrapping := newCluster("fresh")
	bootstrapping.Status = etcdv1alpha1.EtcdClusterStatus{}
	bootstrapPod := newPod("fresh", "fresh-0").obj()
	bootstrapPod.Status = corev1.PodStatus{Phase: corev1.PodPending}

	// Paused, with a spec the operator has not acted on.
	pausedPods, paused := healthyCluster()
	paused.paused()
	paused.Generation = 3
	paused.Status.Conditions[3] = metav1.Condition{Type: etcdv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonPaused, Message: `The operator changes nothing while the annotation etcd.aenix.io/paused is "true"; it would now: AddLearner main-3`, LastTransitionTime: ago(2 * time.Minute)}
	pausedPods[1] = newPod("main", "main-1").node("worker-b").notReady().obj()

	podsForbidden := &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.PodList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "alice" cannot list resource "pods" in API group "" in the namespace "prod"`))
		}
		return c.List(ctx, list, opts...)
	}}

	for _, tc := range []struct {
		name    string
		objs    []client.Object
		funcs   *interceptor.Funcs
		width   int
		args    []string
		cluster string
	}{
		{name: "healthy-pipe", objs: append(healthyPods, healthy.obj()), args: []string{"status", "main"}},
		{name: "healthy-wide", objs: append(healthyPods, healthy.obj()), width: 160, args: []string{"status", "main"}},
		{name: "healthy-narrow", objs: append(healthyPods, healthy.obj()), width: 80, args: []string{"status", "main"}},
		{name: "healthy-very-narrow", objs: append(healthyPods, healthy.obj()), width: 50, args: []string{"status", "main"}},
		{name: "healthy-narrow-o-wide", objs: append(healthyPods, healthy.obj()), width: 80, args: []string{"status", "main", "-o", "wide"}},
		{name: "learner-wide", objs: append(learnerPods, learner.obj()), width: 160, args: []string{"status", "main"}},
		{name: "learner-narrow", objs: append(learnerPods, learner.obj()), width: 80, args: []string{"status", "main"}},
		{name: "unhealthy-wide", objs: append(unhealthyPods, unhealthy.obj()), width: 160, args: []string{"status", "main"}},
		{name: "unhealthy-narrow", objs: append(unhealthyPods, unhealthy.obj()), width: 80, args: []string{"status", "main"}},
		{name: "bootstrapping", objs: []client.Object{bootstrapPod, bootstrapping.obj()}, width: 120, args: []string{"status", "fresh"}},
		{name: "paused", objs: append(pausedPods, paused.obj()), width: 120, args: []string{"status", "main"}},
		{name: "pods-forbidden", objs: append(healthyPods, healthy.obj()), funcs: podsForbidden, width: 120, args: []string{"status", "main"}},
		{name: "members-unhealthy", objs: append(unhealthyPods, unhealthy.obj()), width: 120, args: []string{"members", "main"}},
		{name: "status-json", objs: append(learnerPods, learner.obj()), args: []string{"status", "main", "-o", "json"}},
		{name: "members-yaml", objs: append(unhealthyPods, unhealthy.obj()), args: []string{"members", "main", "-o", "yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCommand(t, tc.objs, tc.funcs, tc.width, tc.args...)
			if r.err != nil {
				t.Fatalf("%v: %v", tc.args, r.err)
			}
			if r.errOut != "" {
				t.Errorf("stderr: %q", r.errOut)
			}
			golden(t, "status/"+tc.name+".golden", r.out)
			if tc.width > 0 && (tc.args[len(tc.args)-1] != "wide") {
				for i, line := range splitLines(r.out) {
					if len([]rune(line)) > tc.width {
						t.Errorf("line %d is %d characters wide, more than the terminal's %d: %q", i+1, len([]rune(line)), tc.width, line)
					}
				}
			}
		})
	}
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i, r := range s {
		if r == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return lines
}

func TestMembersOfClusterWithoutMembers(t *testing.T) {
	t.Parallel()
	c := newCluster("fresh").condition(etcdv1alpha1.ConditionReady, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping, "Waiting for the seed member fresh-0 to start", time.Minute)
	r := runCommand(t, []client.Object{c.obj()}, nil, 0, "members", "fresh")
	want := "etcdcluster fresh has no members yet: Ready=False (Bootstrapping: Waiting for the seed member fresh-0 to start)"
	if r.err == nil || r.err.Error() != want {
		t.Errorf("got error %v, want %q", r.err, want)
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 kB", 25_165_824: "25 MB", 4_096_000: "4.1 MB", 2_147_483_648: "2.1 GB", 8_589_934_592: "8.6 GB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	t.Parallel()
	got := wrap("one two three fourteenletters five", 9)
	want := []string{"one two", "three", "fourteenletters", "five"}
	if len(got) != len(want) {
		t.Fatalf("wrap = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("wrap = %q, want %q", got, want)
		}
	}
}
