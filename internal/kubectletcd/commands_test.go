package kubectletcd

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

var clustersResource = schema.GroupResource{Group: etcdv1alpha1.GroupVersion.Group, Resource: "etcdclusters"}

// failGet makes every Get fail with err.
func failGet(err error) *interceptor.Funcs {
	return &interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return err
	}}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(clustersResource, "main", errors.New(`User "alice" cannot get resource "etcdclusters" in API group "etcd.aenix.io" in the namespace "prod"`))
	patchForbidden := &interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return apierrors.NewForbidden(clustersResource, "main", errors.New(`User "alice" cannot patch resource "etcdclusters" in API group "etcd.aenix.io" in the namespace "prod"`))
	}}
	main := newCluster("main").formed("3.6.5").obj()
	for _, tc := range []struct {
		name  string
		objs  []client.Object
		funcs *interceptor.Funcs
		args  []string
		want  string
	}{
		{name: "unknown cluster", args: []string{"status", "nope"}, want: "etcdcluster nope not found in namespace prod"},
		{name: "unknown cluster, members", args: []string{"members", "nope"}, want: "etcdcluster nope not found in namespace prod"},
		{name: "unknown cluster, pause", args: []string{"pause", "nope"}, want: "etcdcluster nope not found in namespace prod"},
		{name: "unknown tenant", args: []string{"credentials", "nope"}, want: "etcdtenant nope not found in namespace prod"},
		{
			name: "forbidden get", funcs: failGet(forbidden), args: []string{"status", "main"},
			want: `User "alice" is not allowed to get etcdclusters.etcd.aenix.io in namespace prod (check with: kubectl auth can-i get etcdclusters.etcd.aenix.io -n prod)`,
		},
		{
			name: "forbidden patch", objs: []client.Object{main}, funcs: patchForbidden, args: []string{"pause", "main"},
			want: `User "alice" is not allowed to patch etcdclusters.etcd.aenix.io in namespace prod (check with: kubectl auth can-i patch etcdclusters.etcd.aenix.io -n prod)`,
		},
		{
			name: "forbidden without a user", funcs: failGet(apierrors.NewForbidden(clustersResource, "main", errors.New("denied"))), args: []string{"members", "main"},
			want: `you are not allowed to get etcdclusters.etcd.aenix.io in namespace prod (check with: kubectl auth can-i get etcdclusters.etcd.aenix.io -n prod)`,
		},
		{
			name: "CRD not installed", funcs: failGet(&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "etcd.aenix.io", Kind: "EtcdCluster"}, SearchedVersions: []string{"v1alpha1"}}), args: []string{"status", "main"},
			want: "the API server does not serve etcdclusters.etcd.aenix.io: is the etcd operator installed in this cluster (its CRDs)?",
		},
		{
			name: "unauthorized", funcs: failGet(apierrors.NewUnauthorized("Unauthorized")), args: []string{"status", "main"},
			want: "the API server did not accept your credentials (401 Unauthorized): log in again, or check --context and --kubeconfig",
		},
		{name: "no name", args: []string{"status"}, want: "kubectl etcd status takes the name of one EtcdCluster: kubectl etcd status NAME [flags]"},
		{name: "two names", args: []string{"credentials", "a", "b"}, want: "kubectl etcd credentials takes the name of one EtcdTenant: kubectl etcd credentials TENANT [flags]"},
		{name: "bad output", objs: []client.Object{main}, args: []string{"status", "main", "-o", "xml"}, want: `unknown output format "xml": use wide, json or yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCommand(t, tc.objs, tc.funcs, 0, tc.args...)
			if r.err == nil || r.err.Error() != tc.want {
				t.Errorf("%v: got error %v,\nwant %q", tc.args, r.err, tc.want)
			}
			if r.out != "" {
				t.Errorf("%v printed %q along with its error", tc.args, r.out)
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cluster    *etcdv1alpha1.EtcdCluster
		args       []string
		wantPaused bool
		wantOut    string
	}{
		{
			name: "pause", cluster: newCluster("main").obj(), args: []string{"pause", "main"}, wantPaused: true,
			wantOut: "etcdcluster.etcd.aenix.io/main paused: the operator changes nothing of it until kubectl etcd resume main\n",
		},
		{
			name: "pause a paused cluster", cluster: newCluster("main").paused().obj(), args: []string{"pause", "main"}, wantPaused: true,
			wantOut: "etcdcluster.etcd.aenix.io/main is already paused\n",
		},
		{
			name: "resume", cluster: newCluster("main").paused().obj(), args: []string{"resume", "main"}, wantPaused: false,
			wantOut: "etcdcluster.etcd.aenix.io/main resumed\n",
		},
		{
			name: "resume a running cluster", cluster: newCluster("main").obj(), args: []string{"resume", "main"}, wantPaused: false,
			wantOut: "etcdcluster.etcd.aenix.io/main is not paused\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cluster.Annotations = mergeMaps(tc.cluster.Annotations, map[string]string{"team": "storage"})
			r := runCommand(t, []client.Object{tc.cluster}, nil, 0, tc.args...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.out != tc.wantOut {
				t.Errorf("printed %q, want %q", r.out, tc.wantOut)
			}
			got := &etcdv1alpha1.EtcdCluster{}
			if err := r.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "main"}, got); err != nil {
				t.Fatal(err)
			}
			if got.IsPaused() != tc.wantPaused {
				t.Errorf("paused = %v, want %v (annotations %v)", got.IsPaused(), tc.wantPaused, got.Annotations)
			}
			if got.Annotations["team"] != "storage" {
				t.Errorf("another annotation was lost: %v", got.Annotations)
			}
		})
	}
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
