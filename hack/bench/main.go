// Command bench measures the operator on the local cluster and prints the
// median, minimum and maximum of several runs of each scenario: time from
// apply to Ready for 1, 3 and 5 members (and its phases, between the
// operator's membership events and each member Pod Ready), time per scale
// step on a cluster at rest (and its phases), time back to full strength
// after a member's Pod is deleted and after its data is lost, time to roll
// a 3-member cluster to new options and from etcd 3.5 to 3.6 (and its
// phases, between the operator's events and each new Pod Ready) and the
// longest run of failed writes during each roll, once the operator leads;
// the operator's memory and CPU at rest, and
// its memory once the cluster holds 2,000 Secrets of 10 KiB that are none
// of its business (its cache must not hold them), and one operator with
// many clusters: 100 running clusters of 1 member, then 1,000 whose
// members never start, each time its memory, its CPU at rest and how long
// a spec change on one cluster takes to reach it. It is a benchmark, not a
// test: it asserts nothing beyond each scenario finishing. Run it with
// `make bench`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

func main() {
	runs := flag.Int("runs", 3, "Runs of each scenario.")
	root := flag.String("root", ".", "The repository.")
	memoryOnly := flag.Bool("memory-only", false, "Measure only the operator's memory and CPU at rest and with unrelated Secrets (to compare two builds of the operator); the same as --scenarios memory.")
	only := flag.String("scenarios", strings.Join(scenarios, ","), "The scenarios to run, comma-separated, from "+strings.Join(scenarios, ", ")+".")
	flag.IntVar(&fleetRunning, "fleet-running", fleetRunning, "Clusters of 1 member the fleet scenario runs.")
	flag.IntVar(&fleetIdle, "fleet-idle", fleetIdle, "Clusters whose members never start that the fleet scenario creates after the running ones are gone.")
	flag.StringVar(&cpuProfile, "cpu-profile", "", "Run the operator with Go's pprof endpoints on and write a CPU profile of each window at rest to this path (suffixed with the scenario), for `go tool pprof`.")
	flag.Parse()
	if *memoryOnly {
		*only = "memory"
	}
	chosen := map[string]bool{}
	for s := range strings.SplitSeq(*only, ",") {
		if !slices.Contains(scenarios, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q in --scenarios: choose from %s\n", s, strings.Join(scenarios, ", "))
			os.Exit(2)
		}
		chosen[s] = true
	}
	if err := run(*root, *runs, chosen); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// scenarios are what the bench can measure; --scenarios picks some.
var scenarios = []string{"bootstrap", "scale", "recover", "roll", "memory", "fleet"}

type bench struct {
	env *support.Env
	c   client.Client
	ns  string
}

func run(root string, runs int, chosen map[string]bool) error {
	env, stop, err := support.Start(root)
	if err != nil {
		return err
	}
	defer stop()
	if err := env.InstallOperator(); err != nil {
		return err
	}
	if cpuProfile != "" {
		if err := kubectlOperator(env, "patch", "deployment/etcd-operator-controller-manager", "--type=json",
			`-p=[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--pprof-bind-address=:`+pprofPort+`"}]`); err != nil {
			return err
		}
		if err := kubectlOperator(env, "rollout", "status", "deployment/etcd-operator-controller-manager", "--timeout=150s"); err != nil {
			return err
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: support.Scheme()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.Background(), ns) }()
	b := &bench{env: env, c: c, ns: ns.Name}
	// The operator's Pod is Ready before it leads: restarted, it waits for
	// the one it replaces to give the lease up (8 s on 2026-12-06). The
	// scenarios time the operator's work, not its start.
	if err := b.pollEvery(ctx, 100*time.Millisecond, 2*time.Minute, func() error { return b.operatorLeads(ctx) }); err != nil {
		return err
	}

	results := map[string][]time.Duration{}
	order := []string{}
	record := func(name string, d time.Duration) {
		if _, ok := results[name]; !ok {
			order = append(order, name)
		}
		results[name] = append(results[name], d)
		fmt.Fprintf(os.Stderr, "  %s: %s\n", name, d.Round(10*time.Millisecond))
	}
	for i := range runs {
		if !chosen["bootstrap"] && !chosen["scale"] && !chosen["recover"] && !chosen["roll"] {
			break
		}
		fmt.Fprintf(os.Stderr, "run %d of %d\n", i+1, runs)
		for _, n := range []int32{1, 3, 5} {
			if !chosen["bootstrap"] {
				break
			}
			d, phases, err := b.bootstrap(ctx, fmt.Sprintf("boot%d-%d", n, i), n)
			if err != nil {
				return err
			}
			record(fmt.Sprintf("apply to Ready, %d member(s)", n), d)
			for _, p := range phases {
				record(fmt.Sprintf("  %d: %s", n, p.name), p.took)
			}
		}
		if chosen["scale"] {
			steps, err := b.scale(ctx, fmt.Sprintf("scale-%d", i))
			if err != nil {
				return err
			}
			for _, s := range steps {
				record(s.name, s.took)
			}
		}
		for _, loss := range []bool{false, true} {
			if !chosen["recover"] {
				break
			}
			d, phases, err := b.recover(ctx, fmt.Sprintf("recover-%d-%v", i, loss), loss)
			if err != nil {
				return err
			}
			name, short := "full strength after a Pod deletion (claim kept)", "Pod"
			if loss {
				name, short = "full strength after data loss (Pod and claim deleted)", "data"
			}
			record(name, d)
			for _, p := range phases {
				record(fmt.Sprintf("  %s: %s", short, p.name), p.took)
			}
		}
		for j, change := range rollChanges {
			if !chosen["roll"] {
				break
			}
			took, window, phases, err := b.roll(ctx, fmt.Sprintf("roll-%d-%d", i, j), change)
			if err != nil {
				return err
			}
			record("roll 3 members to "+change.name+" (claims kept)", took)
			for _, p := range phases {
				record("  roll to "+change.name+": "+p.name, p.took)
			}
			record("  roll to "+change.name+": longest run of failed writes", window)
		}
	}

	fmt.Printf("\nEtcdCluster benchmark on the local cluster, %d runs (median [min, max])\n\n", max(runs, 1))
	for _, name := range order {
		ds := slices.Clone(results[name])
		slices.Sort(ds)
		fmt.Printf("%-58s %8s [%s, %s]\n", name, ds[len(ds)/2].Round(100*time.Millisecond), ds[0].Round(100*time.Millisecond), ds[len(ds)-1].Round(100*time.Millisecond))
	}
	if chosen["memory"] {
		if err := b.memory(ctx); err != nil {
			return err
		}
	}
	if chosen["fleet"] {
		return b.fleet(ctx)
	}
	return nil
}

// memory measures the operator's memory and CPU at rest, then its memory
// once the cluster holds many Secrets that are none of its business.
func (b *bench) memory(ctx context.Context) error {
	mem, cpu, err := b.operatorAtRest("memory", 10*time.Second)
	if err != nil {
		return err
	}
	memSecrets, err := b.unrelatedSecrets(ctx, unrelatedSecrets, unrelatedSecretSize)
	if err != nil {
		return err
	}
	fmt.Printf("%-58s %8s\n", "operator memory at rest (RSS)", mem)
	fmt.Printf("%-58s %8s\n", "operator CPU at rest", cpu)
	fmt.Printf("%-58s %8s\n", fmt.Sprintf("operator memory with %d unrelated %d KiB Secrets (RSS)", unrelatedSecrets, unrelatedSecretSize>>10), memSecrets)
	return nil
}

// The unrelated Secrets scenario: a cluster that holds many Secrets of
// other applications.
const (
	unrelatedSecrets    = 2000
	unrelatedSecretSize = 10 << 10
)

// unrelatedSecrets creates n Secrets of size bytes that neither name nor
// belong to any EtcdCluster, lets the operator's watches take them in, and
// returns the operator's resident memory then. The Secrets go with the
// bench's namespace.
func (b *bench) unrelatedSecrets(ctx context.Context, n, size int) (string, error) {
	failed := eightAtOnce(n, func(i int) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: fmt.Sprintf("unrelated-%04d", i)},
			Data: map[string][]byte{"blob": []byte(strings.Repeat("x", size))}}
		return b.c.Create(ctx, s)
	})
	if failed != nil {
		return "", fmt.Errorf("creating %d unrelated Secrets: %w", n, failed)
	}
	// A window for the operator's informers to receive them, as for the
	// measurement at rest: there is no state of the operator to wait for.
	time.Sleep(15 * time.Second)
	pid, err := b.operatorPID()
	if err != nil {
		return "", err
	}
	return residentMemory(pid)
}

// bootstrap creates a cluster of n members and returns the time to Ready
// and where it went: the time from the apply to Ready seen, split at the
// operator's membership events (each recorded to the microsecond: a
// member's Pod created, a learner added or promoted) and at each member
// Pod seen Ready; each phase is named by the marks it lies between,
// members by ordinal, so runs compare. It deletes the cluster afterwards.
func (b *bench) bootstrap(ctx context.Context, name string, n int32) (time.Duration, []step, error) {
	cluster := b.cluster(name, n, false)
	start := time.Now()
	if err := b.c.Create(ctx, cluster); err != nil {
		return 0, nil, err
	}
	defer b.remove(ctx, cluster)
	podReadyAt := map[string]time.Time{}
	if err := b.poll(ctx, func() error {
		if err := b.notePodsReady(ctx, name, start, podReadyAt); err != nil {
			return err
		}
		return b.ready(ctx, cluster, n)
	}); err != nil {
		return 0, nil, err
	}
	ready := time.Now()
	marks, err := b.eventMarks(ctx, cluster, start)
	if err != nil {
		return 0, nil, err
	}
	return ready.Sub(start), splitAt(start, "apply", append(marks, podReadyMarks(name, podReadyAt)...), ready), nil
}

// memberOrdinal finds the ordinal of a member of cluster in an event's
// note ("Created Pod boot3-0-2 (...)": 2).
func memberOrdinal(cluster, note string) string {
	m := regexp.MustCompile(regexp.QuoteMeta(cluster) + `-(\d+)\b`).FindStringSubmatch(note)
	if m == nil {
		return "?"
	}
	return m[1]
}

// stepReasons are the reasons of the operator's events that mark a step
// of a change of membership or of a roll: a member's Pod created or
// deleted to be rebuilt, a learner added or promoted, a member removed,
// leadership moved.
var stepReasons = []string{"MemberPodCreated", "MemberRolling", "MemberAdded", "MemberPromoted", "MemberRemoved", "LeaderMoved"}

// eventMarks are the operator's step events about cluster since a
// moment, each named by its reason and the ordinal of the member it is
// about ("MemberPromoted #3").
func (b *bench) eventMarks(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, since time.Time) ([]mark, error) {
	events := &eventsv1.EventList{}
	if err := b.c.List(ctx, events, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, err
	}
	var marks []mark
	for _, e := range events.Items {
		if e.Regarding.Kind == "EtcdCluster" && e.Regarding.Name == cluster.Name && slices.Contains(stepReasons, e.Reason) && !e.EventTime.Time.Before(since) {
			marks = append(marks, mark{e.Reason + " #" + memberOrdinal(cluster.Name, e.Note), e.EventTime.Time})
		}
	}
	return marks, nil
}

type step struct {
	name string
	took time.Duration
}

// etcdConnectedWindow is how long etcd wants every voter connected to the
// leader before it takes a change of membership (HealthInterval).
const etcdConnectedWindow = 5 * time.Second

// scale measures the steps 3 -> 5 -> 3.
func (b *bench) scale(ctx context.Context, name string) ([]step, error) {
	cluster := b.cluster(name, 3, false)
	if err := b.c.Create(ctx, cluster); err != nil {
		return nil, err
	}
	defer b.remove(ctx, cluster)
	if err := b.awaitReady(ctx, cluster, 3); err != nil {
		return nil, err
	}
	var steps []step
	for _, pair := range [][2]int32{{3, 5}, {5, 3}} {
		// Each step starts on a cluster at rest: etcd takes no change of
		// membership until every voter has been connected to the leader
		// for 5 s (its strict reconfiguration check), which right after
		// a bootstrap or a promotion would be timed as the step's.
		time.Sleep(etcdConnectedWindow)
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Replicas = ptr.To(pair[1])
		start := time.Now()
		if err := b.c.Patch(ctx, cluster, patch); err != nil {
			return nil, err
		}
		if err := b.awaitReady(ctx, cluster, pair[1]); err != nil {
			return nil, err
		}
		done := time.Now()
		name := fmt.Sprintf("%d -> %d", pair[0], pair[1])
		steps = append(steps, step{"scale step " + name, done.Sub(start)})
		marks, err := b.eventMarks(ctx, cluster, start)
		if err != nil {
			return nil, err
		}
		for _, p := range splitAt(start, "apply", marks, done) {
			steps = append(steps, step{"  " + name + ": " + p.name, p.took})
		}
	}
	return steps, nil
}

// recover deletes a member's Pod (and with dataLoss its claim) of a
// 3-member cluster with claims and returns the time until the cluster is
// Ready with 3 members again, none of them the deleted Pod, and where it
// went: the old Pod gone, the operator's membership events, the new Pod
// Ready.
func (b *bench) recover(ctx context.Context, name string, dataLoss bool) (time.Duration, []step, error) {
	cluster := b.cluster(name, 3, true)
	if err := b.c.Create(ctx, cluster); err != nil {
		return 0, nil, err
	}
	defer b.remove(ctx, cluster)
	if err := b.awaitReady(ctx, cluster, 3); err != nil {
		return 0, nil, err
	}
	victim := &corev1.Pod{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name + "-1"}, victim); err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if dataLoss {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "data-" + victim.Name}}
		if err := b.c.Delete(ctx, claim); err != nil {
			return 0, nil, err
		}
	}
	if err := b.c.Delete(ctx, victim); err != nil {
		return 0, nil, err
	}
	var gone, replacementReady time.Time
	err := b.poll(ctx, func() error {
		pods := &corev1.PodList{}
		if err := b.c.List(ctx, pods, client.InNamespace(b.ns), client.MatchingLabels{etcdv1alpha1.LabelCluster: name}); err != nil {
			return err
		}
		ready, victimSeen := 0, false
		for _, p := range pods.Items {
			switch {
			case p.UID == victim.UID:
				victimSeen = true
			case podReady(&p):
				ready++
				if p.CreationTimestamp.After(start) && replacementReady.IsZero() {
					replacementReady = time.Now()
				}
			}
		}
		if !victimSeen && gone.IsZero() {
			gone = time.Now()
		}
		if ready != 3 {
			return fmt.Errorf("%d of 3 member Pods ready", ready)
		}
		return b.ready(ctx, cluster, 3)
	})
	if err != nil {
		return 0, nil, err
	}
	done := time.Now()
	marks, err := b.eventMarks(ctx, cluster, start)
	if err != nil {
		return 0, nil, err
	}
	marks = append(marks, mark{"old Pod gone", gone}, mark{"new Pod Ready", replacementReady})
	return done.Sub(start), splitAt(start, "delete", marks, done), nil
}

// mark is a moment something was seen.
type mark struct {
	name string
	at   time.Time
}

// splitAt splits the time from start to end at marks, in the order they
// happened (unset marks are left out), into steps named by the marks they
// lie between.
func splitAt(start time.Time, first string, marks []mark, end time.Time) []step {
	marks = slices.DeleteFunc(slices.Clone(marks), func(m mark) bool { return m.at.IsZero() })
	slices.SortStableFunc(marks, func(a, b mark) int { return a.at.Compare(b.at) })
	var out []step
	prev, at := first, start
	for _, m := range marks {
		out = append(out, step{name: prev + " -> " + m.name, took: m.at.Sub(at)})
		prev, at = m.name, m.at
	}
	return append(out, step{name: prev + " -> Ready seen", took: end.Sub(at)})
}

// roll changes the options of a 3-member cluster with claims while a
// writer writes through the client Service, and returns the time until
// every member runs the new spec, the longest run of failed writes, and
// where the time went: the operator's events (a member's Pod deleted to
// be rebuilt, created again, leadership moved) and each new Pod Ready.
func (b *bench) roll(ctx context.Context, name string, change rollChange) (time.Duration, time.Duration, []step, error) {
	cluster := b.cluster(name, 3, true)
	if change.from != "" {
		cluster.Spec.PodTemplate = etcdImage(change.from)
	}
	if err := b.c.Create(ctx, cluster); err != nil {
		return 0, 0, nil, err
	}
	defer b.remove(ctx, cluster)
	if err := b.awaitReady(ctx, cluster, 3); err != nil {
		return 0, 0, nil, err
	}
	svc := &corev1.Service{}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(cluster), svc); err != nil {
		return 0, 0, nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + net.JoinHostPort(svc.Spec.ClusterIP, "2379")}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, nil, err
	}
	defer func() { _ = cli.Close() }()
	wctx, stopWriter := context.WithCancel(ctx)
	window := make(chan time.Duration)
	go func() { window <- writeUntil(wctx, cli) }()

	patch := client.MergeFrom(cluster.DeepCopy())
	if change.to != "" {
		cluster.Spec.PodTemplate = etcdImage(change.to)
	} else {
		cluster.Spec.Options = map[string]string{"election-timeout": "1200"}
	}
	start := time.Now()
	if err := b.c.Patch(ctx, cluster, patch); err != nil {
		stopWriter()
		<-window
		return 0, 0, nil, err
	}
	podReadyAt := map[string]time.Time{}
	err = b.poll(ctx, func() error {
		if err := b.notePodsReady(ctx, name, start, podReadyAt); err != nil {
			return err
		}
		// One read for both checks: the status a pass writes as the
		// roll starts is Ready (every member still is) at the new
		// generation, and the one before it had every member updated;
		// two reads that each saw one of them took a roll as done.
		got := &etcdv1alpha1.EtcdCluster{}
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
			return err
		}
		if err := readyWith(got, 3); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation || got.Status.UpdatedReplicas != 3 {
			return fmt.Errorf("%d of 3 members rolled", got.Status.UpdatedReplicas)
		}
		return nil
	})
	done := time.Now()
	stopWriter()
	longest := <-window
	if err != nil {
		return 0, 0, nil, err
	}
	marks, err := b.eventMarks(ctx, cluster, start)
	if err != nil {
		return 0, 0, nil, err
	}
	return done.Sub(start), longest, splitAt(start, "apply", append(marks, podReadyMarks(name, podReadyAt)...), done), nil
}

// notePodsReady records in at when each member Pod of cluster created
// after since is first seen Ready (to the bench's poll, 100 ms).
func (b *bench) notePodsReady(ctx context.Context, cluster string, since time.Time, at map[string]time.Time) error {
	pods := &corev1.PodList{}
	if err := b.c.List(ctx, pods, client.InNamespace(b.ns), client.MatchingLabels{etcdv1alpha1.LabelCluster: cluster}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if podReady(&p) && p.CreationTimestamp.After(since.Add(-time.Second)) && at[p.Name].IsZero() {
			at[p.Name] = time.Now()
		}
	}
	return nil
}

// podReadyMarks are the marks of the member Pods seen Ready (notePodsReady).
func podReadyMarks(cluster string, at map[string]time.Time) []mark {
	var marks []mark
	for pod, t := range at {
		marks = append(marks, mark{"Pod Ready #" + memberOrdinal(cluster, pod), t})
	}
	return marks
}

// rollChange is what a roll changes: the options when to is "", else the
// etcd image, from from to to.
type rollChange struct{ name, from, to string }

// rollChanges are the rolls the bench measures.
var rollChanges = []rollChange{
	{name: "new options"},
	{name: "etcd 3.5.21 -> 3.6.16", from: "quay.io/coreos/etcd:v3.5.21", to: "quay.io/coreos/etcd:v3.6.16"},
}

// etcdImage is a Pod template whose etcd container runs image.
func etcdImage(image string) etcdv1alpha1.PodTemplate {
	return etcdv1alpha1.PodTemplate{Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}}}
}

// writeUntil writes keys until ctx ends and returns the longest run of
// failed writes.
func writeUntil(ctx context.Context, cli *clientv3.Client) time.Duration {
	var longest time.Duration
	var failingSince time.Time
	for i := 0; ctx.Err() == nil; i++ {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(cctx, fmt.Sprintf("/bench/%06d", i), "v")
		cancel()
		switch {
		case err == nil && !failingSince.IsZero():
			longest = max(longest, time.Since(failingSince))
			failingSince = time.Time{}
		case err != nil && ctx.Err() == nil && failingSince.IsZero():
			failingSince = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !failingSince.IsZero() {
		longest = max(longest, time.Since(failingSince))
	}
	return longest
}

func (b *bench) cluster(name string, n int32, claims bool) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name}}
	c.Spec.Replicas = ptr.To(n)
	if claims {
		c.Spec.Storage.VolumeClaimTemplate = &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")}},
		}}
	}
	return c
}

// remove deletes cluster and waits until the Pods of the bench's
// clusters are gone, so that the next scenario does not share the machine
// with their teardown: a one-member start right after the run before's
// last roll took 2.5 s instead of 1.6.
func (b *bench) remove(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) {
	_ = b.c.Delete(ctx, cluster)
	err := b.poll(ctx, func() error {
		pods := &corev1.PodList{}
		if err := b.c.List(ctx, pods, client.InNamespace(b.ns)); err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d Pods of deleted clusters still there", n)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "  after deleting %s: %v\n", cluster.Name, err)
	}
}

func (b *bench) awaitReady(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, n int32) error {
	return b.poll(ctx, func() error { return b.ready(ctx, cluster, n) })
}

// ready says whether the cluster reports Ready with n members for its
// current generation.
func (b *bench) ready(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, n int32) error {
	got := &etcdv1alpha1.EtcdCluster{}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
		return err
	}
	return readyWith(got, n)
}

// readyWith says whether c, as read, reports Ready with n members for its
// current generation.
func readyWith(c *etcdv1alpha1.EtcdCluster, n int32) error {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != c.Generation || c.Status.Replicas != n {
		return fmt.Errorf("%s not Ready with %d members", c.Name, n)
	}
	return nil
}

// poll checks every 100 ms for up to 5 minutes.
func (b *bench) poll(ctx context.Context, check func() error) error {
	return b.pollEvery(ctx, 100*time.Millisecond, 5*time.Minute, check)
}

// pollEvery checks every interval for up to timeout.
func (b *bench) pollEvery(ctx context.Context, interval, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// operatorLeads says whether a running operator Pod holds the leader
// lease.
func (b *bench) operatorLeads(ctx context.Context) error {
	lease := &coordinationv1.Lease{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: "etcd-operator-system", Name: "etcd-operator.etcd.aenix.io"}, lease); err != nil {
		return err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	pods := &corev1.PodList{}
	if err := b.c.List(ctx, pods, client.InNamespace("etcd-operator-system")); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) && strings.HasPrefix(holder, p.Name+"_") {
			return nil
		}
	}
	return fmt.Errorf("the leader lease is held by %q, no running operator Pod", holder)
}

// kubectlOperator runs kubectl on the operator's namespace.
func kubectlOperator(env *support.Env, args ...string) error {
	cmd := exec.Command(env.Bin("kubectl-v1.37.2"), append([]string{"-n", "etcd-operator-system"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// cpuProfile is where --cpu-profile writes the profiles; empty for none.
var cpuProfile string

// pprofPort is where the operator serves Go's pprof endpoints with
// --cpu-profile.
const pprofPort = "8082"

// profileOperator writes a CPU profile of the operator over window to
// cpuProfile suffixed with name.
func (b *bench) profileOperator(ctx context.Context, name string, window time.Duration) error {
	pods := &corev1.PodList{}
	if err := b.c.List(ctx, pods, client.InNamespace("etcd-operator-system")); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", net.JoinHostPort(p.Status.PodIP, pprofPort), int(window.Seconds()))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		path := cpuProfile + "." + name
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			_ = f.Close()
			return err
		}
		fmt.Fprintf(os.Stderr, "  CPU profile at rest: %s\n", path)
		return f.Close()
	}
	return errors.New("no running operator Pod to profile")
}

// operatorAtRest reads the operator process's resident memory and its CPU
// use over window, while no cluster changes.
func (b *bench) operatorAtRest(name string, window time.Duration) (string, string, error) {
	pid, err := b.operatorPID()
	if err != nil {
		return "", "", err
	}
	cpu := func() (float64, error) {
		stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		if err != nil {
			return 0, err
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		return (utime + stime) / 100, nil // clock ticks of 10 ms
	}
	before, err := cpu()
	if err != nil {
		return "", "", err
	}
	if cpuProfile != "" {
		if err := b.profileOperator(context.Background(), name, window); err != nil {
			return "", "", err
		}
	} else {
		time.Sleep(window) // measuring CPU over a window, not waiting for state
	}
	after, err := cpu()
	if err != nil {
		return "", "", err
	}
	rss, err := residentMemory(pid)
	if err != nil {
		return "", "", err
	}
	return rss, fmt.Sprintf("%.1f%% of a core", 100*(after-before)/window.Seconds()), nil
}

// operatorPID is the process id of the operator installed from config/:
// of the operator Pods the node agents ran (a restart leaves the older
// ones' directories), the one whose process runs.
func (b *bench) operatorPID() (string, error) {
	pidFiles, _ := filepath.Glob(filepath.Join(b.env.StateDir, "pods", "etcd-operator-system_*", "pids", "manager"))
	for _, f := range pidFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid := strings.TrimSpace(string(data))
		if exe, err := os.Readlink(filepath.Join("/proc", pid, "exe")); err == nil && strings.Contains(filepath.Base(exe), "manager") {
			return pid, nil
		}
	}
	return "", errors.New("the operator's process is not found")
}

// residentMemory is the VmRSS of process pid.
func residentMemory(pid string) (string, error) {
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.Join(strings.Fields(rest), " "), nil
		}
	}
	return "?", nil
}

// eightAtOnce calls do for 0 to n-1, eight calls at a time, and returns
// their errors; after a worker's first error it skips its other calls.
func eightAtOnce(n int, do func(i int) error) error {
	const workers = 8
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for i := range next {
				if err == nil {
					err = do(i)
				}
			}
			errs <- err
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var failed error
	for range workers {
		failed = errors.Join(failed, <-errs)
	}
	return failed
}
