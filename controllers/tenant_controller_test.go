package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// TestTenantLifecycle runs the tenant reconciler in a real manager against
// a fake etcd: a tenant of a cluster with auth gets its user, role,
// password and Secret; a tenant whose prefix lies inside it is refused;
// deleting the tenants revokes them, keeping or deleting keys as their
// retention policies say.
func TestTenantLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The topology reconciler creates the seed Pod the tenant reconciler
	// connects through; envtest runs no etcd, so authentication is
	// reported on here, as the PKI reconciler would.
	eventually(t, 30*time.Second, "the seed Pod", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no member Pod")
		}
		return nil
	})
	eventually(t, 30*time.Second, "authentication reported on", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonEnabled, Message: "on"})
		return k8sClient.Status().Update(ctx, c)
	})
	tenantEtcd.Put("/a/x", "1")
	tenantEtcd.Put("/a/b/y", "2")
	tenantEtcd.Put("/c/z", "3")
	a := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "shared", RetentionPolicy: etcdv1alpha1.RetentionDelete}}
	if err := k8sClient.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	secret := awaitTenant(ctx, t, client.ObjectKeyFromObject(a), etcdv1alpha1.ReasonTenantReady)
	got := tenantEtcd.Tenants()["tenant-a"]
	if got.Prefix != "/a/" || got.Password == "" || got.Password != string(secret.Data[corev1.BasicAuthPasswordKey]) {
		t.Errorf("etcd holds %+v; the Secret's password is %q", got, secret.Data[corev1.BasicAuthPasswordKey])
	}
	if string(secret.Data[keyEndpoints]) != "http://shared."+ns+".svc:2379" || string(secret.Data[keyPrefix]) != "/a/" || string(secret.Data[corev1.BasicAuthUsernameKey]) != "tenant-a" {
		t.Errorf("Secret data %v", secret.Data)
	}

	b := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "shared", Prefix: "/a/b/"}}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitTenant(ctx, t, client.ObjectKeyFromObject(b), etcdv1alpha1.ReasonPrefixOverlap)

	// a's keys overlap b's prefix: deleting a keeps them while b exists.
	if err := k8sClient.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	awaitGone(ctx, t, a)
	if _, ok := tenantEtcd.Tenants()["tenant-a"]; ok {
		t.Error("tenant-a is still in etcd")
	}
	if keys := tenantEtcd.Keys(); !slices.Contains(keys, "/a/x") {
		t.Errorf("a's keys were deleted although b's prefix overlaps them: %v", keys)
	}
	// b is the only tenant left: it gets its prefix now.
	awaitTenant(ctx, t, client.ObjectKeyFromObject(b), etcdv1alpha1.ReasonTenantReady)
	if err := k8sClient.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(ctx, t, b)
	if keys := tenantEtcd.Keys(); !slices.Equal(keys, []string{"/a/b/y", "/a/x", "/c/z"}) {
		t.Errorf("keys after deleting b (Keep): %v", keys)
	}
	if len(tenantEtcd.Tenants()) != 0 {
		t.Errorf("etcd still holds %v", tenantEtcd.Tenants())
	}
}

// awaitTenant waits until a tenant's Ready condition has reason, and
// returns its connection Secret once Ready.
func awaitTenant(ctx context.Context, t *testing.T, key client.ObjectKey, reason string) *corev1.Secret {
	t.Helper()
	tn := &etcdv1alpha1.EtcdTenant{}
	eventually(t, 30*time.Second, fmt.Sprintf("tenant %s with reason %s", key.Name, reason), func() error {
		if err := k8sClient.Get(ctx, key, tn); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(tn.Status.Conditions, etcdv1alpha1.ConditionReady); cond == nil || cond.Reason != reason {
			return fmt.Errorf("Ready is %v", cond)
		}
		return nil
	})
	if reason != etcdv1alpha1.ReasonTenantReady {
		return nil
	}
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: tn.Status.SecretName}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func awaitGone(ctx context.Context, t *testing.T, tn *etcdv1alpha1.EtcdTenant) {
	t.Helper()
	eventually(t, 30*time.Second, "tenant "+tn.Name+" to be gone", func() error {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), &etcdv1alpha1.EtcdTenant{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there")
	})
}
