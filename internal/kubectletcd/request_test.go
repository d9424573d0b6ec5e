package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestRequestGolden runs move-leader and defrag against made-up clusters
// and compares what they print, the error and the annotations they leave
// with testdata/requests/NAME.golden.
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	cluster := func(edit func(*clusterWrapper)) *etcdv1alpha1.EtcdCluster {
		_, c := healthyCluster()
		c.Annotations = map[string]string{"team": "storage"}
		if edit != nil {
			edit(c)
		}
		return c.obj()
	}
	withLearner := func(c *clusterWrapper) {
		c.member(healthyMember("main-3", "2b0c9a1e5d6f7a88", etcdv1alpha1.MemberRoleLearner, 1201))
	}
	sick := func(c *clusterWrapper) {
		c.Status.Members[2].Healthy = false
		c.Status.Members[2].LastError = "context deadline exceeded"
	}
	annotate := func(kv ...string) func(*clusterWrapper) {
		return func(c *clusterWrapper) {
			for i := 0; i < len(kv); i += 2 {
				c.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	forbidden := &interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return apierrors.NewForbidden(clustersResource, "main", errors.New(`User "bob" cannot patch resource "etcdclusters" in API group "etcd.aenix.io" in the namespace "prod"`))
	}}
	for _, tc := range []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		funcs   *interceptor.Funcs
		args    []string
	}{
		{name: "move-leader", cluster: cluster(nil), args: []string{"move-leader", "main", "--to", "main-1"}},
		{name: "move-leader-to-leader", cluster: cluster(nil), args: []string{"move-leader", "main", "--to", "main-0"}},
		{name: "move-leader-to-learner", cluster: cluster(withLearner), args: []string{"move-leader", "main", "--to", "main-3"}},
		{name: "move-leader-unknown-member", cluster: cluster(nil), args: []string{"move-leader", "main", "--to", "main-7"}},
		{name: "move-leader-unhealthy", cluster: cluster(sick), args: []string{"move-leader", "main", "--to", "main-2"}},
		{name: "move-leader-paused", cluster: cluster(annotate(etcdv1alpha1.AnnotationPaused, "true")), args: []string{"move-leader", "main", "--to", "main-2"}},
		{name: "move-leader-replaces", cluster: cluster(annotate(etcdv1alpha1.AnnotationMoveLeader, "main-2")), args: []string{"move-leader", "main", "--to", "main-1"}},
		{name: "move-leader-without-to", cluster: cluster(nil), args: []string{"move-leader", "main"}},
		{name: "move-leader-unknown-cluster", args: []string{"move-leader", "nope", "--to", "main-1"}},
		{name: "move-leader-forbidden", cluster: cluster(nil), funcs: forbidden, args: []string{"move-leader", "main", "--to", "main-1"}},
		{name: "move-leader-not-formed", cluster: newCluster("main").obj(), args: []string{"move-leader", "main", "--to", "main-0"}},
		{name: "defrag-all", cluster: cluster(nil), args: []string{"defrag", "main"}},
		{name: "defrag-member", cluster: cluster(nil), args: []string{"defrag", "main", "--member", "main-2"}},
		{name: "defrag-unknown-member", cluster: cluster(nil), args: []string{"defrag", "main", "--member", "main-9"}},
		{name: "defrag-learner", cluster: cluster(withLearner), args: []string{"defrag", "main", "--member", "main-3"}},
		{name: "defrag-unhealthy", cluster: cluster(sick), args: []string{"defrag", "main"}},
		{
			name:    "defrag-replaces-all",
			cluster: cluster(annotate(etcdv1alpha1.AnnotationDefragment, "all", etcdv1alpha1.AnnotationDefragmented, "main-1")),
			args:    []string{"defrag", "main", "--member", "main-0"},
		},
		{
			name:    "defrag-all-again",
			cluster: cluster(annotate(etcdv1alpha1.AnnotationDefragment, "all", etcdv1alpha1.AnnotationDefragmented, "main-1")),
			args:    []string{"defrag", "main"},
		},
		{name: "defrag-not-formed", cluster: newCluster("main").obj(), args: []string{"defrag", "main"}},
		{name: "defrag-forbidden", cluster: cluster(nil), funcs: forbidden, args: []string{"defrag", "main"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var objs []client.Object
			if tc.cluster != nil {
				objs = append(objs, tc.cluster)
			}
			r := runCommand(t, objs, tc.funcs, 0, tc.args...)
			var b strings.Builder
			fmt.Fprintf(&b, "$ kubectl etcd %s\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), r.out, r.errOut)
			if r.err != nil {
				fmt.Fprintf(&b, "--- error\n%v\n", r.err)
				if r.out != "" {
					t.Errorf("printed %q along with its error", r.out)
				}
			}
			if tc.cluster != nil {
				got := &etcdv1alpha1.EtcdCluster{}
				if err := r.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "main"}, got); err != nil {
					t.Fatal(err)
				}
				b.WriteString("--- annotations\n")
				for _, k := range slices.Sorted(maps.Keys(got.Annotations)) {
					fmt.Fprintf(&b, "%s=%s\n", k, got.Annotations[k])
				}
			}
			golden(t, "requests/"+tc.name+".golden", b.String())
		})
	}
}

// TestRequestWait: with --wait the command returns once the operator has
// removed the annotation, telling what Maintenance says meanwhile; a
// request that another replaces, or that outlasts --timeout, is an error.
func TestRequestWait(t *testing.T) {
	t.Parallel()
	// The "operator": on the third read after the request, the annotation
	// is gone (done), or replaced by another value.
	operator := func(after func(c *etcdv1alpha1.EtcdCluster)) *interceptor.Funcs {
		reads := 0
		return &interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := cl.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			c, ok := obj.(*etcdv1alpha1.EtcdCluster)
			if !ok || c.Annotations[etcdv1alpha1.AnnotationDefragment] == "" {
				return nil
			}
			if reads++; reads == 3 && after != nil {
				after(c)
				return cl.Update(ctx, c)
			}
			return nil
		}}
	}
	withMaintenance := func() *etcdv1alpha1.EtcdCluster {
		_, c := healthyCluster()
		c.condition(etcdv1alpha1.ConditionMaintenance, metav1.ConditionTrue, "Defragment", "main-1: 12Mi of its 40Mi database is free", time.Minute)
		return c.obj()
	}
	fast := func(o *Options) { o.WaitPoll = time.Millisecond }
	pods, _ := healthyCluster()

	done := runCommandWith(t, append(pods, withMaintenance()), operator(func(c *etcdv1alpha1.EtcdCluster) {
		delete(c.Annotations, etcdv1alpha1.AnnotationDefragment)
	}), 0, fast, "defrag", "main", "--wait")
	if done.err != nil || !strings.Contains(done.out, "etcdcluster.etcd.aenix.io/main: done (etcd.aenix.io/defragment=all)") ||
		!strings.Contains(done.errOut, "waiting: Maintenance Defragment (True): main-1: 12Mi of its 40Mi database is free") {
		t.Errorf("defrag --wait: %v\nstdout %q\nstderr %q", done.err, done.out, done.errOut)
	}

	replaced := runCommandWith(t, append(pods, withMaintenance()), operator(func(c *etcdv1alpha1.EtcdCluster) {
		c.Annotations[etcdv1alpha1.AnnotationDefragment] = "main-2"
	}), 0, fast, "defrag", "main", "--wait")
	if replaced.err == nil || !strings.Contains(replaced.err.Error(), "another request replaced this one while waiting (etcd.aenix.io/defragment=main-2)") {
		t.Errorf("defrag --wait replaced meanwhile: %v", replaced.err)
	}

	late := runCommandWith(t, append(pods, withMaintenance()), operator(nil), 0, fast, "defrag", "main", "--member", "main-1", "--wait", "--timeout", "20ms")
	if late.err == nil || !strings.Contains(late.err.Error(), "the request etcd.aenix.io/defragment=main-1 is not done after 20ms; the operator's Maintenance condition: Defragment (True)") {
		t.Errorf("defrag --wait past its timeout: %v", late.err)
	}
}
