package memberclient

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestConfigReadsThePasswordWhereAuthMayBeOn: root's password is what the
// client sends wherever etcd's authentication may be on, and the Secret
// is not read where it cannot be.
func TestConfigReadsThePasswordWhereAuthMayBeOn(t *testing.T) {
	authCond := func(status metav1.ConditionStatus, reason string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: etcdv1alpha1.ConditionAuthentication, Status: status, Reason: reason, ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name       string
		enableAuth bool
		conditions []metav1.Condition
		wantRead   bool
	}{
		{name: "spec on, not yet turned on", enableAuth: true, wantRead: true},
		{name: "spec on, on", enableAuth: true, conditions: authCond(metav1.ConditionTrue, etcdv1alpha1.ReasonEnabled, 3), wantRead: true},
		// Turned on at an earlier generation, then the spec cleared: on
		// until the PKI reconciler turns it off, which takes root.
		{name: "spec off, condition on", conditions: authCond(metav1.ConditionTrue, etcdv1alpha1.ReasonEnabled, 2), wantRead: true},
		// Turned on, interrupted before the condition was written, then
		// the spec cleared: the condition still says off, but of an
		// earlier generation.
		{name: "spec off, off at an earlier generation", conditions: authCond(metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, 1), wantRead: true},
		{name: "spec off, kept on for tenants", conditions: authCond(metav1.ConditionFalse, etcdv1alpha1.ReasonTenantsExist, 3), wantRead: true},
		{name: "spec off, unknown", conditions: authCond(metav1.ConditionUnknown, etcdv1alpha1.ReasonUnreachable, 3), wantRead: true},
		{name: "spec off, no condition yet", wantRead: true},
		{name: "spec off, off", conditions: authCond(metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, 3), wantRead: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd", Generation: 3},
				Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{EnableAuth: tc.enableAuth}},
				Status:     etcdv1alpha1.EtcdClusterStatus{Conditions: tc.conditions},
			}
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-root-password"},
				Data:       map[string][]byte{corev1.BasicAuthPasswordKey: []byte("s3cret")},
			}
			reader := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(secret).Build()}
			cfg, err := Config(context.Background(), reader, c, []string{"http://etcd-0:2379"})
			if err != nil {
				t.Fatal(err)
			}
			if read := reader.gets > 0; read != tc.wantRead {
				t.Errorf("read the root password Secret: %v, want %v", read, tc.wantRead)
			}
			wantUser, wantPassword := "", ""
			if tc.wantRead {
				wantUser, wantPassword = "root", "s3cret"
			}
			if cfg.Username != wantUser || cfg.Password != wantPassword {
				t.Errorf("credentials %q/%q, want %q/%q", cfg.Username, cfg.Password, wantUser, wantPassword)
			}
		})
	}
}

type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
