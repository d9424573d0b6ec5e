package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func tenant(name, cluster, prefix string, age time.Duration) etcdv1alpha1.EtcdTenant {
	return etcdv1alpha1.EtcdTenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Spec:       etcdv1alpha1.EtcdTenantSpec{ClusterName: cluster, Prefix: prefix},
	}
}

func authCluster(auth metav1.ConditionStatus, sec *etcdv1alpha1.SecuritySpec) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdClusterSpec{Security: sec}}
	if auth != "" {
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAuthentication, Status: auth, Message: "etcd authentication is off"}}
	}
	return c
}

func TestTenantBlocker(t *testing.T) {
	t.Parallel()
	managed := &etcdv1alpha1.SecuritySpec{EnableAuth: true, TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}
	a := tenant("a", "shared", "", 2*time.Hour)
	tests := []struct {
		name    string
		tenant  etcdv1alpha1.EtcdTenant
		cluster *etcdv1alpha1.EtcdCluster
		others  []etcdv1alpha1.EtcdTenant
		reason  string
		says    string
	}{
		{"ready", a, authCluster(metav1.ConditionTrue, managed), nil, "", ""},
		{"no cluster", a, nil, nil, etcdv1alpha1.ReasonClusterNotFound, "EtcdCluster shared does not exist in namespace ns: create it, or fix spec.clusterName"},
		{"auth off in the spec: etcd tells (authBlocker)", a, authCluster("", &etcdv1alpha1.SecuritySpec{}), nil, "", ""},
		{"auth without TLS", a, authCluster(metav1.ConditionTrue, &etcdv1alpha1.SecuritySpec{EnableAuth: true}), nil, "", ""},
		{
			"user certificates without an issuer", a,
			authCluster(metav1.ConditionTrue, &etcdv1alpha1.SecuritySpec{EnableAuth: true, TLS: &etcdv1alpha1.TLSSpec{ServerSecret: "s", ServerTrustedCASecret: "s-ca", ClientSecret: "c", ClientTrustedCASecret: "c-ca"}}),
			nil, etcdv1alpha1.ReasonNoIssuer, "signed by the CA in Secret c-ca, which the operator cannot issue",
		},
		{
			"prefix inside an older tenant's", tenant("b", "shared", "/a/b/", time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{a, tenant("b", "shared", "/a/b/", time.Hour)}, etcdv1alpha1.ReasonPrefixOverlap, "Prefix /a/b/ overlaps prefix /a/ of EtcdTenant a",
		},
		{
			"the older tenant keeps its prefix", a, authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{a, tenant("b", "shared", "/a/b/", time.Hour)}, "", "",
		},
		{
			"same prefix on another cluster", a, authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{tenant("z", "other", "/a/", 3*time.Hour), a}, "", "",
		},
		{
			"a prefix that merely starts alike", tenant("ab", "shared", "/ab/", time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{a, tenant("ab", "shared", "/ab/", time.Hour)}, "", "",
		},
		{
			"an older tenant is not refused for a newer one inside it", tenant("outer", "shared", "/x/", 2*time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{tenant("inner", "shared", "/x/y/", time.Hour), tenant("outer", "shared", "/x/", 2*time.Hour)}, "", "",
		},
		{
			"created in the same second: the name sorting first keeps its prefix", tenant("b", "shared", "/x/", time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{tenant("b", "shared", "/x/", time.Hour), tenant("a", "shared", "/x/y/", time.Hour)}, etcdv1alpha1.ReasonPrefixOverlap, "overlaps prefix /x/y/ of EtcdTenant a",
		},
		{
			"created in the same second: the name sorting later is refused", tenant("a", "shared", "/x/y/", time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{tenant("b", "shared", "/x/", time.Hour), tenant("a", "shared", "/x/y/", time.Hour)}, "", "",
		},
		{
			"an older tenant being deleted yields", tenant("b", "shared", "/a/b/", time.Hour), authCluster(metav1.ConditionTrue, managed),
			[]etcdv1alpha1.EtcdTenant{deleted(a), tenant("b", "shared", "/a/b/", time.Hour)}, "", "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reason, msg := tenantBlocker(&tt.tenant, tt.cluster, tt.others)
			if reason != tt.reason || !strings.Contains(msg, tt.says) {
				t.Errorf("tenantBlocker() = %q, %q; want %q saying %q", reason, msg, tt.reason, tt.says)
			}
		})
	}
}

// deleted is t being deleted.
func deleted(t etcdv1alpha1.EtcdTenant) etcdv1alpha1.EtcdTenant {
	t.DeletionTimestamp = &metav1.Time{Time: t.CreationTimestamp.Add(time.Minute)}
	return t
}

func TestAuthBlocker(t *testing.T) {
	t.Parallel()
	asked := &etcdv1alpha1.SecuritySpec{EnableAuth: true}
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		authOn  bool
		reason  string
		says    string
	}{
		{"on as asked", authCluster(metav1.ConditionTrue, asked), true, "", ""},
		{"kept on for the tenants although the spec clears it", authCluster(metav1.ConditionFalse, &etcdv1alpha1.SecuritySpec{}), true, "", ""},
		{"off as asked", authCluster(metav1.ConditionFalse, &etcdv1alpha1.SecuritySpec{}), false, etcdv1alpha1.ReasonAuthDisabled, "set spec.security.enableAuth: true on it"},
		{"off, no security at all", authCluster("", nil), false, etcdv1alpha1.ReasonAuthDisabled, "EtcdCluster shared runs without etcd authentication"},
		{"asked, not on yet", authCluster("", asked), false, etcdv1alpha1.ReasonWaitingForAuth, "Waiting for etcd authentication on EtcdCluster shared: the operator has not turned it on yet"},
		{"asked, the condition says why not", authCluster(metav1.ConditionFalse, asked), false, etcdv1alpha1.ReasonWaitingForAuth, "Waiting for etcd authentication on EtcdCluster shared: etcd authentication is off"},
		{"asked, a stale True condition is not believed", authCluster(metav1.ConditionTrue, asked), false, etcdv1alpha1.ReasonWaitingForAuth, "the operator has not turned it on yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reason, msg := authBlocker(tt.cluster, tt.authOn)
			if reason != tt.reason || !strings.Contains(msg, tt.says) {
				t.Errorf("authBlocker() = %q, %q; want %q saying %q", reason, msg, tt.reason, tt.says)
			}
		})
	}
}

func TestConnectionData(t *testing.T) {
	t.Parallel()
	tn := tenant("a", "shared", "", 0)
	plain := authCluster(metav1.ConditionTrue, &etcdv1alpha1.SecuritySpec{EnableAuth: true})
	got := connectionData(&tn, plain, nil, nil, "pw")
	want := map[string]string{"endpoints": "http://shared.ns.svc:2379", "prefix": "/a/", "username": "tenant-a", "password": "pw"}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	managed := authCluster(metav1.ConditionTrue, &etcdv1alpha1.SecuritySpec{EnableAuth: true, TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}})
	ca := &corev1.Secret{Data: map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("server")}}
	cert := &corev1.Secret{Data: map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT"), "tls.key": []byte("KEY")}}
	got = connectionData(&tn, managed, ca, cert, "")
	want = map[string]string{"endpoints": "https://shared.ns.svc:2379", "prefix": "/a/", "ca.crt": "CA", "tls.crt": "CRT", "tls.key": "KEY"}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !tenantPasswordMode(&tn, plain) || tenantPasswordMode(&tn, managed) {
		t.Error("a tenant gets a password without operator-managed TLS, and only then unless it asks")
	}
}
