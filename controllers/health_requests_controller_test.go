package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// requestWorld is a cluster "r" of three members r-0 (leader), r-1 and
// r-2 with their Pods, on a fake API server and a fake etcd, and a health
// reconciler between them.
type requestWorld struct {
	t        *testing.T
	etcd     *fake.Client
	api      client.Client
	recorder *events.FakeRecorder
	r        *HealthReconciler
}

func newRequestWorld(t *testing.T, annotations map[string]string, funcs *interceptor.Funcs) *requestWorld {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "uid-r", Annotations: annotations},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)},
	}
	objs := []client.Object{c}
	var members []etcd.Member
	for i, name := range []string{"r-0", "r-1", "r-2"} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, Labels: builder.MemberSelectorLabels(c),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))},
		}, Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.0.0.%d", i+1)}})
		members = append(members, etcd.Member{ID: uint64(i + 1), Name: name, ClientURLs: []string{builder.ClientURL(c, name)}, PeerURLs: []string{"http://" + name + ":2380"}})
	}
	b := fakeclient.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(objs...).WithStatusSubresource(c)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	w := &requestWorld{t: t, etcd: fake.New(members...), api: b.Build(), recorder: &events.FakeRecorder{Events: make(chan string, 100)}}
	w.r = &HealthReconciler{Client: w.api, Recorder: w.recorder,
		NewEtcdClient: func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
			return unclosable{w.etcd}, nil
		}}
	return w
}

// pass runs one pass of the reconciler and returns the events it raised.
func (w *requestWorld) pass() []string {
	w.t.Helper()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "r"}}); err != nil {
		w.t.Fatalf("Reconcile: %v", err)
	}
	var got []string
	for {
		select {
		case e := <-w.recorder.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func (w *requestWorld) cluster() *etcdv1alpha1.EtcdCluster {
	w.t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "r"}, c); err != nil {
		w.t.Fatal(err)
	}
	return c
}

func hasEvent(events []string, prefix string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// TestMoveLeaderRequest: the health reconciler moves leadership through
// etcd, says so, removes the request and does not move it again.
func TestMoveLeaderRequest(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationMoveLeader: "r-2", "team": "storage"}, nil)
	events := w.pass()
	if w.etcd.Leader() != 3 {
		t.Errorf("leader is member %d, want r-2 (3)", w.etcd.Leader())
	}
	if !hasEvent(events, "Normal LeaderMoved Moved leadership from r-0 to r-2") {
		t.Errorf("events %q, want LeaderMoved", events)
	}
	c := w.cluster()
	if _, left := c.Annotations[etcdv1alpha1.AnnotationMoveLeader]; left || c.Annotations["team"] != "storage" {
		t.Errorf("annotations %v, want the request gone and the others kept", c.Annotations)
	}
	w.pass()
	if n := len(w.etcd.CallsOf(fake.MoveLeader)); n != 1 {
		t.Errorf("MoveLeader called %d times, want once", n)
	}
}

// TestMoveLeaderRequestAfterCrash: an operator that moved leadership and
// stopped before removing the request finds the target leading: it only
// removes the request.
func TestMoveLeaderRequestAfterCrash(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationMoveLeader: "r-1"}, nil)
	w.etcd.WithLeader(2)
	events := w.pass()
	if n := len(w.etcd.CallsOf(fake.MoveLeader)); n != 0 {
		t.Errorf("MoveLeader called %d times, want none", n)
	}
	if !hasEvent(events, "Normal RequestDone Member r-1 leads already") {
		t.Errorf("events %q, want RequestDone", events)
	}
	if _, left := w.cluster().Annotations[etcdv1alpha1.AnnotationMoveLeader]; left {
		t.Errorf("the request is still there")
	}
}

// TestMoveLeaderRequestHeld: a request to move leadership to a member
// that cannot lead waits, says why in the Maintenance condition and once
// in a Warning event, and is carried out when the member can.
func TestMoveLeaderRequestHeld(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationMoveLeader: "r-1"}, nil)
	ep := builder.ClientURL(w.cluster(), "r-1")
	w.etcd.WithUnhealthy(ep, context.DeadlineExceeded)
	events := w.pass()
	if !hasEvent(events, `Warning RequestHeld The request to move leadership to "r-1" waits: r-1 does not answer`) {
		t.Errorf("events %q, want a Warning RequestHeld", events)
	}
	cond := meta.FindStatusCondition(w.cluster().Status.Conditions, etcdv1alpha1.ConditionMaintenance)
	if cond == nil || cond.Reason != etcdv1alpha1.ReasonRequestHeld || !strings.Contains(cond.Message, "r-1 does not answer") {
		t.Errorf("Maintenance = %+v, want RequestHeld naming r-1", cond)
	}
	if again := w.pass(); hasEvent(again, "Warning RequestHeld") {
		t.Errorf("the same wait raised its event again: %q", again)
	}
	if len(w.etcd.CallsOf(fake.MoveLeader)) != 0 || w.cluster().Annotations[etcdv1alpha1.AnnotationMoveLeader] != "r-1" {
		t.Fatalf("a held request was carried out or dropped")
	}
	w.etcd.WithUnhealthy(ep, nil)
	w.pass()
	if w.etcd.Leader() != 2 {
		t.Errorf("once r-1 answers, leader is %d, want r-1 (2)", w.etcd.Leader())
	}
}

// TestDefragmentRequest: "all" defragments each member once, one per
// pass, followers first and the leader last, then the request and its
// progress are gone.
func TestDefragmentRequest(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationDefragment: etcdv1alpha1.DefragmentAll}, nil)
	var events []string
	for range 5 {
		events = append(events, w.pass()...)
	}
	var got []string
	for _, call := range w.etcd.CallsOf(fake.Defragment) {
		got = append(got, call.Endpoint)
	}
	c := w.cluster()
	want := []string{builder.ClientURL(c, "r-1"), builder.ClientURL(c, "r-2"), builder.ClientURL(c, "r-0")}
	if !slices.Equal(got, want) {
		t.Errorf("defragmented %v, want %v", got, want)
	}
	for _, m := range []string{"r-0", "r-1", "r-2"} {
		if !hasEvent(events, "Normal Defragmented Defragmented "+m) {
			t.Errorf("no Defragmented event for %s: %q", m, events)
		}
	}
	if len(c.Annotations) != 0 {
		t.Errorf("annotations left: %v", c.Annotations)
	}
}

// TestDefragmentRequestChangedMeanwhile: when the request changes between
// the pass's read and its edit, the edit fails and the new request stays.
func TestDefragmentRequestChangedMeanwhile(t *testing.T) {
	t.Parallel()
	funcs := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		changed := &etcdv1alpha1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), changed); err != nil {
			return err
		}
		changed.Annotations[etcdv1alpha1.AnnotationDefragment] = "r-2"
		if err := c.Update(ctx, changed); err != nil {
			return err
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationDefragment: "r-1"}, funcs)
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "r"}}); err == nil {
		t.Errorf("Reconcile succeeded, want the edit refused")
	} else {
		t.Logf("Reconcile: %v", err)
	}
	if got := w.cluster().Annotations[etcdv1alpha1.AnnotationDefragment]; got != "r-2" {
		t.Errorf("request = %q, want the new one, r-2", got)
	}
}

// watchedDefrag is the fake etcd, whose Defragment calls during first.
type watchedDefrag struct {
	unclosable
	during func(endpoint string)
}

func (w watchedDefrag) Defragment(ctx context.Context, endpoint string) error {
	w.during(endpoint)
	return w.unclosable.Defragment(ctx, endpoint)
}

// TestDefragmentMarksThePod: while the operator defragments a member,
// its Pod says so (the topology reconciler does not replace it for not
// answering), and not after; a mark left by a pass that stopped midway
// goes once its member answers or its budget has passed.
func TestDefragmentMarksThePod(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationDefragment: "r-1"}, nil)
	annotation := func(name string) (string, bool) {
		pod := &corev1.Pod{}
		if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		v, ok := pod.Annotations[etcdv1alpha1.AnnotationDefragmenting]
		return v, ok
	}
	marked := map[string]string{}
	w.r.NewEtcdClient = func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
		return watchedDefrag{unclosable{w.etcd}, func(string) {
			for _, name := range []string{"r-0", "r-1", "r-2"} {
				if v, ok := annotation(name); ok {
					marked[name] = v
				}
			}
		}}, nil
	}
	w.pass()
	if len(w.etcd.CallsOf(fake.Defragment)) != 1 {
		t.Fatalf("defragmentations: %v", w.etcd.CallsOf(fake.Defragment))
	}
	if since, err := time.Parse(time.RFC3339, marked["r-1"]); len(marked) != 1 || err != nil || time.Since(since) > time.Minute {
		t.Errorf("Pods marked during the defragmentation of r-1: %v", marked)
	}
	if v, ok := annotation("r-1"); ok {
		t.Errorf("r-1 is still marked %s after its defragmentation", v)
	}

	// Marks left by a pass that stopped midway (an operator restart):
	// etcd goes on defragmenting, so a mark stays while its member does
	// not answer, within the budget.
	mark := func(name string, since time.Time) {
		pod := &corev1.Pod{}
		if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		pod.Annotations = map[string]string{etcdv1alpha1.AnnotationDefragmenting: since.UTC().Format(time.RFC3339)}
		if err := w.api.Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	c := w.cluster()
	mark("r-1", time.Now())                            // answers: done
	mark("r-2", time.Now())                            // silent: still defragmenting
	mark("r-0", time.Now().Add(-c.DefragmentBudget())) // silent past the budget
	w.etcd.WithUnhealthy(builder.ClientURL(c, "r-2"), errors.New("defragmenting"))
	w.etcd.WithUnhealthy(builder.ClientURL(c, "r-0"), errors.New("stuck"))
	w.pass()
	for name, want := range map[string]bool{"r-0": false, "r-1": false, "r-2": true} {
		if _, ok := annotation(name); ok != want {
			t.Errorf("after a pass, %s marked: %v, want %v", name, ok, want)
		}
	}
}

// TestInterruptedDefragmentationKeepsTheMark: a defragmentation call
// that ends early (the operator stopping: its context cancelled) leaves
// the member marked, for etcd goes on defragmenting it; the mark goes at
// the first pass the member answers.
func TestInterruptedDefragmentationKeepsTheMark(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationDefragment: "r-1"}, nil)
	marked := func() bool {
		pod := &corev1.Pod{}
		if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "r-1"}, pod); err != nil {
			t.Fatal(err)
		}
		_, ok := pod.Annotations[etcdv1alpha1.AnnotationDefragmenting]
		return ok
	}
	w.etcd.FailOnce(fake.Defragment, context.Canceled)
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "r"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reconcile: %v, want the defragmentation's cancellation", err)
	}
	if !marked() {
		t.Fatal("r-1 is not marked after its defragmentation was cut short: the topology reconciler would replace it for not answering")
	}
	ep := builder.ClientURL(w.cluster(), "r-1")
	w.etcd.WithUnhealthy(ep, errors.New("defragmenting"))
	w.pass()
	if !marked() {
		t.Fatal("the mark went while r-1 did not answer")
	}
	w.etcd.WithUnhealthy(ep, nil)
	w.pass()
	if marked() {
		t.Error("r-1 is still marked once it answers and its defragmentation is done")
	}
}

// TestRequestNotRepeatedFromAStaleCache: the pass after a request was
// carried out may read the cluster from a cache that has not seen the
// edit removing it yet; it must not carry the request out again (a long
// defragmentation was done twice so).
func TestRequestNotRepeatedFromAStaleCache(t *testing.T) {
	t.Parallel()
	var stale *etcdv1alpha1.EtcdCluster
	funcs := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		cluster, ok := obj.(*etcdv1alpha1.EtcdCluster)
		if !ok {
			return c.Get(ctx, key, obj, opts...)
		}
		if stale != nil {
			stale.DeepCopyInto(cluster) // what a lagging cache holds
			return nil
		}
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		stale = cluster.DeepCopy()
		return nil
	}}
	w := newRequestWorld(t, map[string]string{etcdv1alpha1.AnnotationDefragment: "r-1"}, funcs)
	w.pass()
	w.pass()
	if n := len(w.etcd.CallsOf(fake.Defragment)); n != 1 {
		t.Errorf("the request was carried out %d times, want once", n)
	}
	// Other writes during a long step (the topology reconciler's status)
	// give the cluster newer versions, which the cache may hold without
	// the edit: TestLongDefragmentation saw its defragmentation done twice.
	stale.ResourceVersion += "9"
	w.pass()
	if n := len(w.etcd.CallsOf(fake.Defragment)); n != 1 {
		t.Errorf("from a cache with a newer version that lacks the edit, the request was carried out %d times, want once", n)
	}
	// Once the cache shows the edit, the same request asked again is
	// carried out.
	stale = nil
	w.pass()
	stale = nil
	ask := []byte(`{"metadata":{"annotations":{"` + etcdv1alpha1.AnnotationDefragment + `":"r-1"}}}`)
	if err := w.api.Patch(context.Background(), &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}, client.RawPatch(types.MergePatchType, ask)); err != nil {
		t.Fatal(err)
	}
	stale = nil
	w.pass()
	if n := len(w.etcd.CallsOf(fake.Defragment)); n != 2 {
		t.Errorf("the request asked again was carried out %d times in all, want twice", n)
	}
}

// TestNoSpaceCompactsBeforeDefragmenting: under NOSPACE the reconciler
// compacts before its first defragmentation even when the live data is
// under the compaction threshold, once (a second compaction finds
// nothing to drop and says nothing), then defragments and disarms.
func TestNoSpaceCompactsBeforeDefragmenting(t *testing.T) {
	t.Parallel()
	w := newRequestWorld(t, nil, nil)
	c := w.cluster()
	for i, name := range []string{"r-0", "r-1", "r-2"} {
		w.etcd.WithStatus(etcd.Status{Endpoint: builder.ClientURL(c, name), MemberID: uint64(i + 1), ClusterID: fake.DefaultClusterID, Leader: 1, DBSize: 10 << 20, DBSizeInUse: 4 << 20})
	}
	w.etcd.WithAlarm(etcd.Alarm{MemberID: 2, Type: etcd.AlarmNoSpace})
	var events []string
	for range 5 {
		events = append(events, w.pass()...)
	}
	var calls []string
	for _, call := range w.etcd.Calls() {
		switch call.Method {
		case fake.Compact, fake.Defragment, fake.Disarm:
			calls = append(calls, string(call.Method))
		}
	}
	want := []string{"Compact", "Defragment", "Compact", "Defragment", "Compact", "Defragment", "Compact", "DisarmAlarm"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	compacted := slices.DeleteFunc(slices.Clone(events), func(e string) bool { return !strings.HasPrefix(e, "Normal Compacted") })
	if len(compacted) != 1 {
		t.Errorf("Compacted events %q, want one", compacted)
	}
}

// TestHealthWaitsForPodsOnTheirWatch: with member Pods that run, the
// cluster is probed again after the probe interval; with none, not at
// all until a Pod changes (the reconciler watches them).
func TestHealthWaitsForPodsOnTheirWatch(t *testing.T) {
	w := newRequestWorld(t, nil, nil)
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "r"}}
	res, err := w.r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != DefaultProbeInterval {
		t.Errorf("with Pods running: requeue after %s, %v; want %s", res.RequeueAfter, err, DefaultProbeInterval)
	}
	for _, name := range []string{"r-0", "r-1", "r-2"} {
		pod := &corev1.Pod{}
		if err := w.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.PodIP = "" // not scheduled, or its sandbox not up
		if err := w.api.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	res, err = w.r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != 0 {
		t.Errorf("with no Pod running: requeue after %s, %v; want none", res.RequeueAfter, err)
	}
}
