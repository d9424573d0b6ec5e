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
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// TestTenantLifecycle runs the tenant reconciler in a real manager against
// a fake etcd: a tenant of a cluster with auth gets its user, role,
// password and Secret; a tenant whose prefix lies inside it is refused and
// loses the user and role an earlier pass gave it; deleting the tenants
// revokes them, keeping or deleting keys as their retention policies say.
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
	awaitSeedPod(ctx, t, c)
	// The tenants' etcd has authentication on, as the PKI reconciler
	// would have turned it on (the test manager's reaches no etcd).
	if err := tenantEtcd.EnableAuth(ctx, ""); err != nil {
		t.Fatal(err)
	}
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

	// b comes with a user and role an earlier pass gave it (as when a
	// and b are created in the same second and b, reconciled first, did
	// not see a yet): refused, it loses them before the refusal shows.
	if err := tenantEtcd.EnsureTenant(ctx, etcd.Tenant{User: "tenant-b", Prefix: "/a/b/", Password: "from an earlier pass"}); err != nil {
		t.Fatal(err)
	}
	b := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "shared", Prefix: "/a/b/"}}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitTenant(ctx, t, client.ObjectKeyFromObject(b), etcdv1alpha1.ReasonPrefixOverlap)
	if got, ok := tenantEtcd.Tenants()["tenant-b"]; ok {
		t.Errorf("b is refused but etcd still holds its user and role: %+v", got)
	}
	if _, ok := tenantEtcd.Tenants()["tenant-a"]; !ok {
		t.Error("a, which keeps its prefix, lost its user")
	}

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

// TestTenantWhileAuthIsKeptOn checks that a tenant follows etcd's
// authentication, not the spec: it stays Ready while the operator keeps
// authentication on for it although spec.security.enableAuth is cleared,
// and once authentication is off it is refused and holds no user or role.
func TestTenantWhileAuthIsKeptOn(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	awaitSeedPod(ctx, t, c)
	if err := tenantEtcd.EnableAuth(ctx, ""); err != nil {
		t.Fatal(err)
	}
	tn := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept-t"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "kept"}}
	if err := k8sClient.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	awaitTenant(ctx, t, client.ObjectKeyFromObject(tn), etcdv1alpha1.ReasonTenantReady)

	// enableAuth cleared; etcd keeps authentication on (the PKI
	// reconciler's TenantsExist): the tenant keeps its access, and a
	// tenant created now gets its own.
	passes := len(tenantEtcd.CallsOf(fake.AuthStatus))
	updateCluster(ctx, t, c, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Security.EnableAuth = false })
	setAuthCondition(ctx, t, c, metav1.ConditionFalse, etcdv1alpha1.ReasonTenantsExist)
	eventually(t, 30*time.Second, "a pass of the tenant after the spec change", func() error {
		if len(tenantEtcd.CallsOf(fake.AuthStatus)) == passes {
			return fmt.Errorf("no pass yet")
		}
		return nil
	})
	late := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept-u"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "kept"}}
	if err := k8sClient.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	awaitTenant(ctx, t, client.ObjectKeyFromObject(late), etcdv1alpha1.ReasonTenantReady)
	awaitTenant(ctx, t, client.ObjectKeyFromObject(tn), etcdv1alpha1.ReasonTenantReady)
	for _, user := range []string{"tenant-kept-t", "tenant-kept-u"} {
		if _, ok := tenantEtcd.Tenants()[user]; !ok {
			t.Errorf("etcd does not hold %s while authentication is kept on", user)
		}
	}

	// Authentication goes off (by hand here): the tenant is refused and
	// revoked.
	if err := tenantEtcd.DisableAuth(ctx); err != nil {
		t.Fatal(err)
	}
	setAuthCondition(ctx, t, c, metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled)
	for _, x := range []*etcdv1alpha1.EtcdTenant{tn, late} {
		awaitTenant(ctx, t, client.ObjectKeyFromObject(x), etcdv1alpha1.ReasonAuthDisabled)
		if _, ok := tenantEtcd.Tenants()[x.UserName()]; ok {
			t.Errorf("%s is refused for authentication off but etcd still holds its user and role", x.Name)
		}
		if err := k8sClient.Delete(ctx, x); err != nil {
			t.Fatal(err)
		}
		awaitGone(ctx, t, x)
	}
}

// awaitSeedPod waits for the seed Pod the topology reconciler creates,
// which the tenant reconciler connects through.
func awaitSeedPod(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	eventually(t, 30*time.Second, "the seed Pod", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no member Pod")
		}
		return nil
	})
}

// setAuthCondition writes the cluster's Authentication condition as the
// PKI reconciler would (the test manager's reaches no etcd).
func setAuthCondition(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "the Authentication condition written", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, Status: status, Reason: reason, Message: reason})
		return k8sClient.Status().Update(ctx, c)
	})
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
