package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

func TestContains(t *testing.T) {
	t.Parallel()
	conditions := []any{
		map[string]any{"type": "Ready", "status": "True"},
		map[string]any{"type": "Healthy", "status": "False"},
	}
	for _, tc := range []struct {
		name      string
		got, want any
		contains  bool
	}{
		{"equal values", "a", "a", true},
		{"different values", "a", "b", false},
		{"a map with more fields", map[string]any{"a": 1.0, "b": 2.0}, map[string]any{"a": 1.0}, true},
		{"a field missing", map[string]any{"b": 2.0}, map[string]any{"a": 1.0}, false},
		{"a field set to another value", map[string]any{"a": 2.0}, map[string]any{"a": 1.0}, false},
		{"a nested field defaulted by the server", map[string]any{"ports": []any{map[string]any{"port": 2379.0, "protocol": "TCP"}}},
			map[string]any{"ports": []any{map[string]any{"port": 2379.0}}}, true},
		{"a list of another length", []any{"a", "b"}, []any{"a"}, false},
		{"a list in another order", []any{"b", "a"}, []any{"a", "b"}, false},
		{"conditions matched by type, others kept", conditions, []any{map[string]any{"type": "Healthy", "status": "False"}}, true},
		{"a condition of another status", conditions, []any{map[string]any{"type": "Ready", "status": "False"}}, false},
		{"a condition missing", conditions, []any{map[string]any{"type": "Progressing", "status": "True"}}, false},
		{"a value where a map is wanted", "x", map[string]any{"a": 1.0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := contains(tc.got, tc.want); got != tc.contains {
				t.Errorf("contains(%v, %v) = %v, want %v", tc.got, tc.want, got, tc.contains)
			}
		})
	}
}

// TestSkipUnchangedApplies applies the same Service and the same status
// again and again: only the first of each reaches the API server, and a
// change by someone else, or a configuration that drops a field, is sent.
func TestSkipUnchangedApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	sent := map[string]int{}
	base := fake.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(cluster).WithStatusSubresource(cluster).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				sent["object"]++
				return c.Apply(ctx, obj, opts...)
			},
			SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
				sent[sub]++
				return c.SubResource(sub).Apply(ctx, obj, opts...)
			},
		}).Build()
	c := newSkipUnchangedApplies(base)

	svc := func(annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: annotations},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379)}}},
		}
	}
	for range 3 {
		if err := applyObject(ctx, c, svc(map[string]string{"a": "1"}), TopologyFieldManager); err != nil {
			t.Fatal(err)
		}
	}
	if sent["object"] != 1 {
		t.Fatalf("the same Service applied 3 times reached the API server %d times; want 1", sent["object"])
	}
	// Someone else changes a field the configuration sets: sent again.
	live := &corev1.Service{}
	if err := base.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c"}, live); err != nil {
		t.Fatal(err)
	}
	live.Annotations["a"] = "changed"
	if err := base.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := applyObject(ctx, c, svc(map[string]string{"a": "1"}), TopologyFieldManager); err != nil {
		t.Fatal(err)
	}
	// A configuration without the annotation: the live object holds every
	// field of it, but the annotation must go, so it is sent.
	if err := applyObject(ctx, c, svc(nil), TopologyFieldManager); err != nil {
		t.Fatal(err)
	}
	if sent["object"] != 3 {
		t.Fatalf("after a change by someone else and a dropped field, the Service reached the API server %d times; want 3", sent["object"])
	}

	patch := statusPatch{conditions: []metav1.Condition{{Type: etcdv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "ok"}}}
	for range 3 {
		current := &etcdv1alpha1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), current); err != nil {
			t.Fatal(err)
		}
		if err := applyStatus(ctx, c, current, TopologyFieldManager, patch); err != nil {
			t.Fatal(err)
		}
	}
	if sent["status"] != 1 {
		t.Fatalf("the same status applied 3 times reached the API server %d times; want 1", sent["status"])
	}
}
