package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/pki"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestTenantsShareACluster runs the examples in examples/tenants: two
// tenants on one TLS + auth cluster, each with a real kube-apiserver whose
// --etcd-* flags come from its connection Secret. Objects of one are
// invisible to the other, a tenant's credentials are refused outside its
// prefix, an overlapping prefix is refused, and deleting a tenant revokes
// its access at once and keeps or deletes its keys as its retention policy
// says.
func TestTenantsShareACluster(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for _, file := range []string{"shared-cluster.yaml", "tenant-a.yaml", "tenant-b.yaml"} {
		createExample(ctx, t, ns, filepath.Join("tenants", file))
	}
	awaitReady(ctx, t, client.ObjectKey{Namespace: ns, Name: "shared"}, 3)
	a := awaitTenantSecret(ctx, t, ns, "tenant-a")
	b := awaitTenantSecret(ctx, t, ns, "tenant-b")
	assertSecretKeys(t, a, "endpoints", "prefix", "ca.crt", "tls.crt", "tls.key")
	assertSecretKeys(t, b, "endpoints", "prefix", "ca.crt", "tls.crt", "tls.key", "username", "password")
	if got, want := string(a.Data["endpoints"]), "https://shared."+ns+".svc:2379"; got != want {
		t.Errorf("tenant-a's endpoints = %q, want %q", got, want)
	}
	shared := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, shared); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shared.Status.Endpoints, []string{string(a.Data["endpoints"])}) || shared.Status.CASecretName != "shared-ca-bundle" {
		t.Errorf("the cluster publishes endpoints %v and CA Secret %q", shared.Status.Endpoints, shared.Status.CASecretName)
	}
	// A tenant gets the cluster's trust bundle as its ca.crt.
	if bundle := secretData(ctx, t, ns, "shared-ca-bundle", "ca.crt"); !bytes.Equal(a.Data["ca.crt"], bundle) || !bytes.Equal(b.Data["ca.crt"], bundle) {
		t.Error("a tenant's ca.crt is not the cluster's trust bundle")
	}
	if string(a.Data["prefix"]) != "/tenant-a/" || string(b.Data["prefix"]) != "/control-planes/b/" {
		t.Errorf("prefixes %q and %q, want /tenant-a/ and /control-planes/b/", a.Data["prefix"], b.Data["prefix"])
	}

	// A kube-apiserver per tenant, from the example.
	apiA := startTenantAPIServer(ctx, t, ns, "tenant-a")
	apiB := startTenantAPIServer(ctx, t, ns, "tenant-b")
	for api, name := range map[kubernetes.Interface]string{apiA: "only-in-a", apiB: "only-in-b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"tenant": name}}
		if _, err := api.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ConfigMap %s: %v", name, err)
		}
	}
	for api, pair := range map[kubernetes.Interface][2]string{apiA: {"only-in-a", "only-in-b"}, apiB: {"only-in-b", "only-in-a"}} {
		if _, err := api.CoreV1().ConfigMaps("default").Get(ctx, pair[0], metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s in its own kube-apiserver: %v", pair[0], err)
		}
		if _, err := api.CoreV1().ConfigMaps("default").Get(ctx, pair[1], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s of the other tenant: %v, want NotFound", pair[1], err)
		}
	}

	// etcd itself refuses tenant-a outside its prefix.
	cliA := tenantClient(ctx, t, ns, a)
	if _, err := cliA.Put(ctx, "/tenant-a/probe", "x"); err != nil {
		t.Errorf("tenant-a writing under its prefix: %v", err)
	}
	for _, key := range []string{"/control-planes/b/registry/x", "/tenant-a-other", "/x"} {
		if _, err := cliA.Put(ctx, key, "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("tenant-a writing %s: %v, want permission denied", key, err)
		}
	}
	for _, prefix := range []string{"/control-planes/b/", "/"} {
		if _, err := cliA.Get(ctx, prefix, clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("tenant-a reading %s: %v, want permission denied", prefix, err)
		}
	}
	rootCert, roots := secretPair(ctx, t, ns, "shared-client-tls")
	root := tlsClient(ctx, t, ns, "shared", roots, rootCert)
	countA, countB := countKeys(ctx, t, root, "/tenant-a/"), countKeys(ctx, t, root, "/control-planes/b/")
	t.Logf("keys written by the tenants' kube-apiservers: %d under /tenant-a/, %d under /control-planes/b/", countA, countB)
	if countA == 0 || countB == 0 {
		t.Errorf("no keys under a tenant's prefix: %d and %d", countA, countB)
	}

	// kubectl etcd on this cluster: its members, from the status and live
	// from etcd, and tenant-b's credentials (a certificate and a password).
	assertPluginShowsMembers(ctx, t, ns, "shared", root)
	assertPluginCredentials(ctx, t, ns, "tenant-b", "/control-planes/b/")

	// A prefix inside tenant-a's is refused, and the refused tenant holds
	// no access. It comes with the user and role a pass gives a tenant
	// that is not refused (as when two tenants are created in the same
	// second and the later name is reconciled before the other appears;
	// root creates them here), and a client certificate with that user as
	// CN from the cluster's client CA, which reads and writes until the
	// refusal and nothing after it.
	plantTenantUser(ctx, t, root, "tenant-nested", "", "/tenant-a/nested/")
	nestedCli := tlsClient(ctx, t, ns, "shared", roots, issueClientCert(ctx, t, shared, "nested-leftover", "tenant-nested"))
	if _, err := nestedCli.Put(ctx, "/tenant-a/nested/before", "x"); err != nil {
		t.Fatalf("the certificate of tenant-nested does not write before the refusal: %v", err)
	}
	nested := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nested"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "shared", Prefix: "/tenant-a/nested/"}}
	if err := k8sClient.Create(ctx, nested); err != nil {
		t.Fatal(err)
	}
	nested = awaitTenantCondition(ctx, t, client.ObjectKeyFromObject(nested), metav1.ConditionFalse, "PrefixOverlap", "EtcdTenant tenant-a")
	assertNoAccess(ctx, t, nestedCli, "a certificate with CN tenant-nested", "/tenant-a/nested/")
	assertRefusedHoldsNothing(ctx, t, nested)

	// Deleting tenant-b (retentionPolicy Delete) revokes it and deletes its keys.
	stopAPIServer(ctx, t, ns, "tenant-b-apiserver")
	cliB := tenantClient(ctx, t, ns, b)
	deleteTenant(ctx, t, ns, "tenant-b")
	if _, err := cliB.Put(ctx, "/control-planes/b/after", "x"); err == nil {
		t.Error("tenant-b still writes after its deletion")
	} else {
		t.Logf("tenant-b after its deletion: %v", err)
	}
	if n := countKeys(ctx, t, root, "/control-planes/b/"); n != 0 {
		t.Errorf("%d keys left under /control-planes/b/ with retentionPolicy Delete", n)
	}
	assertEvent(ctx, t, ns, "tenant-b", "Revoked", "keys under /control-planes/b/ (retentionPolicy Delete)")

	// Deleting tenant-a (Keep) revokes it and keeps its keys.
	stopAPIServer(ctx, t, ns, "tenant-a-apiserver")
	deleteTenant(ctx, t, ns, "tenant-a")
	if _, err := cliA.Get(ctx, "/tenant-a/probe"); err == nil {
		t.Error("tenant-a still reads after its deletion")
	}
	// Events are written with etcd leases and may expire meanwhile; the
	// probe and the ConfigMap may not.
	for _, key := range []string{"/tenant-a/probe", "/tenant-a/configmaps/default/only-in-a"} {
		if n := countKeys(ctx, t, root, key); n != 1 {
			t.Errorf("%s is gone after deleting tenant-a with retentionPolicy Keep", key)
		}
	}
	t.Logf("%d keys under /tenant-a/ after deleting tenant-a", countKeys(ctx, t, root, "/tenant-a/"))
	assertEvent(ctx, t, ns, "tenant-a", "Revoked", "kept the keys under /tenant-a/")
}

// TestTenantWithoutTLS gives a tenant of a cluster without TLS password
// credentials that work under its prefix only, refuses a tenant whose
// prefix lies inside it and revokes the password user that tenant came
// with, and refuses a tenant of a cluster without authentication.
func TestTenantWithoutTLS(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for _, c := range []*etcdv1alpha1.EtcdCluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)}},
	} {
		if err := k8sClient.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []*etcdv1alpha1.EtcdTenant{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "open"}},
	} {
		if err := k8sClient.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	awaitReady(ctx, t, client.ObjectKey{Namespace: ns, Name: "plain"}, 1)
	awaitCondition(ctx, t, client.ObjectKey{Namespace: ns, Name: "plain"}, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionTrue, "the password in Secret plain-root-password")
	s := awaitTenantSecret(ctx, t, ns, "p")
	assertSecretKeys(t, s, "endpoints", "prefix", "username", "password")
	if got, want := string(s.Data["endpoints"]), "http://plain."+ns+".svc:2379"; got != want {
		t.Errorf("endpoints = %q, want %q", got, want)
	}
	cli := tenantClient(ctx, t, ns, s)
	if _, err := cli.Put(ctx, "/p/x", "1"); err != nil {
		t.Errorf("tenant p writing under /p/: %v", err)
	}
	if _, err := cli.Put(ctx, "/q/x", "1"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("tenant p writing /q/x: %v, want permission denied", err)
	}
	anonymous := etcdClient(ctx, t, ns, "plain")
	if _, err := anonymous.Get(ctx, "/p/x"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("reading without credentials: %v, want %v", err, rpctypes.ErrUserEmpty)
	}

	// p-inner's prefix lies inside p's: refused, it loses the password
	// user an earlier pass gave it (root creates it here, see
	// TestTenantsShareACluster).
	root := rootPasswordClient(ctx, t, ns, "plain")
	password := rand.Text()
	plantTenantUser(ctx, t, root, "tenant-p-inner", password, "/p/inner/")
	leftover, err := passwordClient(ctx, t, ns, "plain", "tenant-p-inner", password)
	if err != nil {
		t.Fatalf("the password of tenant-p-inner does not authenticate before the refusal: %v", err)
	}
	if _, err := leftover.Put(ctx, "/p/inner/before", "x"); err != nil {
		t.Fatalf("tenant-p-inner does not write before the refusal: %v", err)
	}
	inner := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-inner"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "plain", Prefix: "/p/inner/"}}
	if err := k8sClient.Create(ctx, inner); err != nil {
		t.Fatal(err)
	}
	inner = awaitTenantCondition(ctx, t, client.ObjectKeyFromObject(inner), metav1.ConditionFalse, "PrefixOverlap", "EtcdTenant p")
	assertNoAccess(ctx, t, leftover, "a client authenticated as tenant-p-inner", "/p/inner/")
	if _, err := passwordClient(ctx, t, ns, "plain", "tenant-p-inner", password); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("authenticating as the refused tenant-p-inner: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
	assertRefusedHoldsNothing(ctx, t, inner)
	if _, err := cli.Put(ctx, "/p/y", "1"); err != nil {
		t.Errorf("tenant p, which keeps its prefix, writing under /p/: %v", err)
	}

	awaitTenantCondition(ctx, t, client.ObjectKey{Namespace: ns, Name: "q"}, metav1.ConditionFalse, "AuthDisabled", "set spec.security.enableAuth: true on it")
}

// TestAuthStaysOnWhileTenantsExist clears spec.security.enableAuth on a
// one-member cluster with tenants t1 and t2: etcd authentication stays
// on, so an anonymous client still cannot read t2's key, the tenants keep
// working, and the Authentication condition (TenantsExist) and a Warning
// event name them and say what to do. Once both are deleted,
// authentication goes off as asked.
func TestAuthStaysOnWhileTenantsExist(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	key := client.ObjectKey{Namespace: ns, Name: "kept"}
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true}}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t1", "t2"} {
		tn := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "kept"}}
		if err := k8sClient.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	awaitReady(ctx, t, key, 1)
	cli1 := tenantClient(ctx, t, ns, awaitTenantSecret(ctx, t, ns, "t1"))
	cli2 := tenantClient(ctx, t, ns, awaitTenantSecret(ctx, t, ns, "t2"))
	if _, err := cli2.Put(ctx, "/t2/secret", "t2's"); err != nil {
		t.Fatalf("t2 writing under /t2/: %v", err)
	}
	anonymous := etcdClient(ctx, t, ns, "kept")
	readT2 := func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := anonymous.Get(cctx, "/t2/secret")
		if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "t2's") {
			return fmt.Errorf("read back %v", resp.Kvs)
		}
		return err
	}
	if err := readT2(); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("an anonymous client reading t2's key: %v, want %v", err, rpctypes.ErrUserEmpty)
	}

	setEnableAuth(ctx, t, key, false)
	cond := awaitAuthObserved(ctx, t, key)
	if err := readT2(); err == nil {
		t.Errorf("after enableAuth: false with tenants t1 and t2, an anonymous client read t2's key (Authentication %s: %s)", cond.Reason, cond.Message)
	} else if !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("an anonymous client reading t2's key: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if cond.Status != metav1.ConditionFalse || cond.Reason != "TenantsExist" {
		t.Errorf("Authentication is %s/%s, want False/TenantsExist", cond.Status, cond.Reason)
	}
	for _, says := range []string{"stays on although spec.security.enableAuth is false", "(EtcdTenants t1, t2)", "delete the cluster's EtcdTenants first", "set spec.security.enableAuth: true"} {
		if !strings.Contains(cond.Message, says) {
			t.Errorf("Authentication says %q, not %q", cond.Message, says)
		}
	}
	assertEvent(ctx, t, ns, "kept", "TenantsExist", "Refusing to turn etcd authentication off")
	// The tenants keep working.
	for _, name := range []string{"t1", "t2"} {
		awaitTenantCondition(ctx, t, client.ObjectKey{Namespace: ns, Name: name}, metav1.ConditionTrue, "Ready")
	}
	if _, err := cli1.Put(ctx, "/t1/after", "x"); err != nil {
		t.Errorf("t1 writing under /t1/ while authentication is kept on: %v", err)
	}
	if _, err := cli2.Get(ctx, "/t2/secret"); err != nil {
		t.Errorf("t2 reading its key while authentication is kept on: %v", err)
	}

	// One tenant left: still on, and the condition names it.
	deleteTenant(ctx, t, ns, "t1")
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionFalse, "(EtcdTenant t2)")
	if err := readT2(); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("with t2 left, an anonymous client reading t2's key: %v, want %v", err, rpctypes.ErrUserEmpty)
	}

	// No tenant left: off, as the spec asks; t2's keys were kept
	// (retentionPolicy Keep) and anyone reads them now.
	deleteTenant(ctx, t, ns, "t2")
	took := awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionFalse, "etcd authentication is off")
	t.Logf("authentication off %s after the last tenant was gone", took.Round(100*time.Millisecond))
	support.Eventually(t, 30*time.Second, "an anonymous client to read t2's key with authentication off", readT2)
	assertEvent(ctx, t, ns, "kept", "AuthDisabled", "Disabled etcd authentication")
}

// setEnableAuth patches the cluster's spec.security.enableAuth.
func setEnableAuth(ctx context.Context, t *testing.T, key client.ObjectKey, on bool) {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Security.EnableAuth = on
	if err := k8sClient.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
}

// awaitAuthObserved waits until the cluster's Authentication condition
// is no longer True and was written for its current generation, and
// returns it.
func awaitAuthObserved(ctx context.Context, t *testing.T, key client.ObjectKey) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	support.Eventually(t, time.Minute, "the Authentication condition of "+key.Name+" for its current spec", func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAuthentication)
		if cond == nil || cond.ObservedGeneration != c.Generation || cond.Status == metav1.ConditionTrue || cond.Status == metav1.ConditionUnknown {
			return fmt.Errorf("Authentication is %v at generation %d", cond, c.Generation)
		}
		got = *cond
		return nil
	})
	return got
}

// createExample creates the objects of a file of examples/ in ns.
func createExample(ctx context.Context, t *testing.T, ns, file string) {
	t.Helper()
	for _, obj := range support.ReadObjects(t, filepath.Join(env.Root, "examples", file)) {
		obj.SetNamespace(ns)
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

// awaitTenantSecret waits until a tenant is Ready and returns its
// connection Secret.
func awaitTenantSecret(ctx context.Context, t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	start := time.Now()
	tn := awaitTenantCondition(ctx, t, client.ObjectKey{Namespace: ns, Name: name}, metav1.ConditionTrue, "Ready")
	t.Logf("tenant %s Ready in %s: %s", name, time.Since(start).Round(time.Second), meta.FindStatusCondition(tn.Status.Conditions, etcdv1alpha1.ConditionReady).Message)
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: tn.Status.SecretName}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// awaitTenantCondition waits until a tenant's Ready condition has status
// and reason and its message says every one of says.
func awaitTenantCondition(ctx context.Context, t *testing.T, key client.ObjectKey, status metav1.ConditionStatus, reason string, says ...string) *etcdv1alpha1.EtcdTenant {
	t.Helper()
	tn := &etcdv1alpha1.EtcdTenant{}
	support.Eventually(t, 3*time.Minute, fmt.Sprintf("tenant %s to be Ready=%s (%s)", key.Name, status, reason), func() error {
		if err := k8sClient.Get(ctx, key, tn); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tn.Status.Conditions, etcdv1alpha1.ConditionReady)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != tn.Generation {
			return fmt.Errorf("Ready is %v", cond)
		}
		for _, s := range says {
			if !strings.Contains(cond.Message, s) {
				return fmt.Errorf("message %q does not say %q", cond.Message, s)
			}
		}
		return nil
	})
	return tn
}

func assertSecretKeys(t *testing.T, s *corev1.Secret, keys ...string) {
	t.Helper()
	var got []string
	for k, v := range s.Data {
		got = append(got, k)
		if len(v) == 0 {
			t.Errorf("Secret %s: %s is empty", s.Name, k)
		}
	}
	if len(got) != len(keys) {
		t.Errorf("Secret %s has keys %v, want exactly %v", s.Name, got, keys)
	}
	for _, k := range keys {
		if _, ok := s.Data[k]; !ok {
			t.Errorf("Secret %s has no %s", s.Name, k)
		}
	}
}

// tenantClient connects to a cluster as a tenant, with what its connection
// Secret holds, through the client Service's ClusterIP.
func tenantClient(ctx context.Context, t *testing.T, ns string, s *corev1.Secret) *clientv3.Client {
	t.Helper()
	endpoint := string(s.Data["endpoints"])
	host := strings.Split(strings.SplitN(endpoint, "://", 2)[1], ":")[0]
	svcName := strings.Split(host, ".")[0]
	if _, ok := s.Data["ca.crt"]; ok {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.Data["ca.crt"])
		pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		if err != nil {
			t.Fatal(err)
		}
		cli := tlsClient(ctx, t, ns, svcName, pool, &pair)
		if user, ok := s.Data["username"]; ok {
			if _, err := cli.Authenticate(ctx, string(user), string(s.Data["password"])); err != nil {
				t.Errorf("the password of %s does not authenticate: %v", user, err)
			}
		}
		return cli
	}
	// The client authenticates as it connects, so it needs the Service
	// to have a Ready endpoint, which may follow the cluster's Ready by a
	// readiness probe period.
	var cli *clientv3.Client
	support.Eventually(t, time.Minute, "a password client of "+svcName, func() error {
		var err error
		cli, err = passwordClient(ctx, t, ns, svcName, string(s.Data["username"]), string(s.Data["password"]))
		return err
	})
	return cli
}

// passwordClient connects to a cluster without client TLS as user, with
// password, through the client Service's ClusterIP. etcd checks the
// password as the client connects: a refused one is the error.
func passwordClient(ctx context.Context, t *testing.T, ns, name, user, password string) (*clientv3.Client, error) {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + net.JoinHostPort(svc.Spec.ClusterIP, "2379")},
		Username:    user,
		Password:    password,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, nil
}

// rootPasswordClient connects to a cluster without client TLS as root,
// with the password in its root password Secret.
func rootPasswordClient(ctx context.Context, t *testing.T, ns, name string) *clientv3.Client {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-root-password"}, s); err != nil {
		t.Fatal(err)
	}
	cli, err := passwordClient(ctx, t, ns, name, string(s.Data["username"]), string(s.Data["password"]))
	if err != nil {
		t.Fatalf("root of %s: %v", name, err)
	}
	return cli
}

// plantTenantUser has root create what the operator gives a tenant: a
// role named user with read-write on prefix only, and a user of that name
// holding it, with password (none: it authenticates by its certificate's
// CN only).
func plantTenantUser(ctx context.Context, t *testing.T, root *clientv3.Client, user, password, prefix string) {
	t.Helper()
	if _, err := root.RoleAdd(ctx, user); err != nil {
		t.Fatalf("adding role %s: %v", user, err)
	}
	if _, err := root.RoleGrantPermission(ctx, user, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatalf("granting %s to role %s: %v", prefix, user, err)
	}
	if _, err := root.UserAddWithOptions(ctx, user, password, &clientv3.UserAddOptions{NoPassword: password == ""}); err != nil {
		t.Fatalf("adding user %s: %v", user, err)
	}
	if _, err := root.UserGrantRole(ctx, user, user); err != nil {
		t.Fatalf("granting role %s to user %s: %v", user, user, err)
	}
}

// issueClientCert has cert-manager issue, from cluster c's client CA, a
// client certificate with CN cn into Secret name, and returns it.
func issueClientCert(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, name, cn string) *tls.Certificate {
	t.Helper()
	cert := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}, Spec: cmapi.CertificateSpec{
		CommonName: cn, SecretName: name, Usages: []cmapi.KeyUsage{cmapi.UsageClientAuth},
		IssuerRef: cmmeta.IssuerReference{Name: pki.ClientCAName(c), Kind: "Issuer", Group: "cert-manager.io"},
	}}
	if err := k8sClient.Create(ctx, cert); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, time.Minute, "cert-manager to issue certificate "+name, func() error {
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
			return err
		}
		if len(s.Data["tls.crt"]) == 0 {
			return fmt.Errorf("secret %s has no tls.crt yet", name)
		}
		return nil
	})
	pair, _ := secretPair(ctx, t, c.Namespace, name)
	return pair
}

// assertNoAccess checks that cli, connected with a refused tenant's
// credentials, neither writes nor reads, under the tenant's prefix or
// anywhere else. The refusal is reported only once the tenant's access
// is gone, so nothing is awaited.
func assertNoAccess(ctx context.Context, t *testing.T, cli *clientv3.Client, who, prefix string) {
	t.Helper()
	for _, key := range []string{prefix + "after", "/x"} {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(cctx, key, "x")
		cancel()
		if err == nil {
			t.Errorf("%s still writes %s", who, key)
		}
	}
	for _, p := range []string{prefix, "/"} {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Get(cctx, p, clientv3.WithPrefix())
		cancel()
		if err == nil {
			t.Errorf("%s still reads %s", who, p)
		} else {
			t.Logf("%s reading %s: %v", who, p, err)
		}
	}
}

// assertRefusedHoldsNothing checks that a refused tenant says it holds no
// etcd user or role, and was handed no connection Secret.
func assertRefusedHoldsNothing(ctx context.Context, t *testing.T, tn *etcdv1alpha1.EtcdTenant) {
	t.Helper()
	if cond := meta.FindStatusCondition(tn.Status.Conditions, etcdv1alpha1.ConditionReady); cond == nil || !strings.Contains(cond.Message, "no etcd user or role") {
		t.Errorf("the refused tenant %s does not say it holds no etcd user or role: %v", tn.Name, cond)
	}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: tn.ConnectionSecretName()}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the refused tenant %s has a connection Secret %s: %v", tn.Name, tn.ConnectionSecretName(), err)
	}
}

func countKeys(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("counting the keys under %s: %v", prefix, err)
	}
	return resp.Count
}

// startTenantAPIServer runs examples/tenants/kube-apiserver.yaml for a
// tenant, with a new service account key and administrator token, and
// returns a client of it once it is Ready.
func startTenantAPIServer(ctx context.Context, t *testing.T, ns, tenant string) kubernetes.Interface {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	token := rand.Text()
	sa := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant + "-apiserver"},
		Data: map[string][]byte{
			"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
			"tokens.csv": []byte(token + ",admin,admin,system:masters\n"),
		},
	}
	if err := k8sClient.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	objs := support.ReadObjects(t, filepath.Join(env.Root, "examples", "tenants", "kube-apiserver.yaml"))
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, pod); err != nil {
		t.Fatal(err)
	}
	// The example is tenant-a's; another tenant's differs only in names.
	rename := func(s string) string { return strings.ReplaceAll(s, "tenant-a", tenant) }
	pod.Namespace, pod.Name, pod.Labels = ns, rename(pod.Name), nil
	ctr := &pod.Spec.Containers[0]
	for i := range ctr.Command {
		ctr.Command[i] = rename(ctr.Command[i])
	}
	for i := range ctr.Env {
		ctr.Env[i].ValueFrom.SecretKeyRef.Name = rename(ctr.Env[i].ValueFrom.SecretKeyRef.Name)
	}
	for i := range pod.Spec.Volumes {
		if s := pod.Spec.Volumes[i].Secret; s != nil {
			s.SecretName = rename(s.SecretName)
		}
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	support.Eventually(t, 3*time.Minute, "kube-apiserver "+pod.Name+" to be Ready", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s, containers %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	t.Logf("kube-apiserver of %s Ready in %s", tenant, time.Since(start).Round(time.Second))
	api, err := kubernetes.NewForConfig(&rest.Config{
		Host:            "https://" + net.JoinHostPort(pod.Status.PodIP, "6443"),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		BearerToken:     token,
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver reports ready before its system namespaces controller
	// has created namespace default (its log says "namespaces kube-system
	// not found" for a few seconds after it starts): a ConfigMap created in
	// default that early is refused. A user of a new control plane waits
	// for it the same way.
	support.Eventually(t, time.Minute, "namespace default in the kube-apiserver of "+tenant, func() error {
		_, err := api.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	})
	return api
}

func stopAPIServer(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// deleteTenant deletes a tenant and waits until it is gone.
func deleteTenant(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	tn := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8sClient.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	support.Eventually(t, time.Minute, "tenant "+name+" to be gone", func() error {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), tn)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there: %v", tn.Status.Conditions)
	})
	t.Logf("tenant %s gone %s after its deletion", name, time.Since(start).Round(100*time.Millisecond))
}

// assertEvent checks that an event of reason about the named object says
// says.
func assertEvent(ctx context.Context, t *testing.T, ns, name, reason, says string) {
	t.Helper()
	support.Eventually(t, 30*time.Second, fmt.Sprintf("a %s event of %s saying %q", reason, name, says), func() error {
		events := &corev1.EventList{}
		if err := k8sClient.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				if strings.Contains(e.Message, says) {
					return nil
				}
				seen = append(seen, e.Message)
			}
		}
		return fmt.Errorf("events: %v", seen)
	})
}
