package pki

import (
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// userClientCA is cluster name of namespace ns, created at created, with
// user-provided Secrets and the client CA in Secret client-ca.
func userClientCA(ns, name string, created time.Time) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
			ServerSecret: "server", ServerTrustedCASecret: "server-ca", ClientSecret: "client", ClientTrustedCASecret: "client-ca",
		}}},
	}
}

// TestSharedClientCA checks which clusters with user-provided Secrets are
// told that another cluster trusts their client CA: the newer of two, by
// the CA's key, never a cluster whose CAs the operator makes.
func TestSharedClientCA(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second)
	root := newRoot(t, "corp etcd clients", now.Add(-time.Hour))
	// The same CA reissued with its key, as a user renewing it would.
	tmpl := *root.cert
	tmpl.NotAfter = now.Add(1000 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &root.key.PublicKey, root.key)
	if err != nil {
		t.Fatal(err)
	}
	reissued, _ := x509.ParseCertificate(der)
	other := newRoot(t, "another CA", now.Add(-time.Hour))
	c := userClientCA("team-b", "db", now)
	older := func(ca *x509.Certificate) OtherCluster {
		return OtherCluster{Namespace: "team-a", Name: "db", Created: now.Add(-time.Hour), ClientCAs: pemOf(ca)}
	}
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		others  []OtherCluster
		want    string
	}{
		{name: "alone", cluster: c},
		{name: "an older cluster trusts the CA", cluster: c, others: []OtherCluster{older(root.cert)},
			want: `spec.security.tls.clientTrustedCASecret: Secret client-ca holds a CA another cluster trusts for its clients (EtcdCluster team-a/db trusts the client CA "corp etcd clients" too): a client certificate issued for one cluster would authenticate on the other, and one with CN root would be root on both. Give each cluster a client CA of its own`},
		{name: "an older cluster trusts the CA reissued with its key", cluster: c, others: []OtherCluster{older(reissued)}, want: "EtcdCluster team-a/db trusts the client CA"},
		{name: "an older cluster trusts another CA", cluster: c, others: []OtherCluster{older(other.cert)}},
		{name: "a newer cluster trusts the CA: it is the one refused", cluster: c,
			others: []OtherCluster{{Namespace: "team-a", Name: "db", Created: now.Add(time.Hour), ClientCAs: pemOf(root.cert)}}},
		{name: "created in the same second: the first by namespace and name stays", cluster: c,
			others: []OtherCluster{{Namespace: "team-a", Name: "db", Created: now, ClientCAs: pemOf(root.cert)}}, want: "EtcdCluster team-a/db"},
		{name: "the cluster itself is no other", cluster: c, others: []OtherCluster{{Namespace: "team-b", Name: "db", Created: now.Add(-time.Hour), ClientCAs: pemOf(root.cert)}}},
		{name: "a cluster whose CAs the operator makes", cluster: managed(etcdv1alpha1.CertManagerSpec{}), others: []OtherCluster{older(root.cert)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := SharedClientCA(tt.cluster, pemOf(root.cert), tt.others)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("SharedClientCA = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSharedClientCARefusesNewClusters checks that a cluster with a shared
// client CA is refused before it forms (no Pod is created while
// CertificatesReady is False) and, once it runs, warned and left running.
func TestSharedClientCARefusesNewClusters(t *testing.T) {
	t.Parallel()
	now := time.Now()
	crt, key := selfSigned(t, now.Add(240*time.Hour))
	secrets := map[string]*corev1.Secret{}
	for _, name := range []string{"server", "server-ca", "client", "client-ca"} {
		secrets[name] = tlsSecret(name, crt, key, crt)
	}
	others := []OtherCluster{{Namespace: "team-a", Name: "db", Created: now.Add(-time.Hour), ClientCAs: crt}}
	for _, formed := range []bool{false, true} {
		c := userClientCA("team-b", "db", now)
		if formed {
			c.Status.ClusterID = "1f2e"
		}
		p := PlanCertificates(Observed{Cluster: c, Secrets: secrets, OtherClusters: others, Now: now})
		ready := p.CertificatesReady
		warned := len(p.Events) > 0 && p.Events[len(p.Events)-1].Reason == etcdv1alpha1.ReasonSharedClientCA && p.Events[len(p.Events)-1].Type == corev1.EventTypeWarning
		switch {
		case !formed && (ready.Status != metav1.ConditionFalse || ready.Reason != etcdv1alpha1.ReasonSharedClientCA || !strings.Contains(ready.Message, "team-a/db")):
			t.Errorf("a new cluster: CertificatesReady = %s %s: %s, want False %s", ready.Status, ready.Reason, ready.Message, etcdv1alpha1.ReasonSharedClientCA)
		case formed && ready.Status != metav1.ConditionTrue:
			t.Errorf("a running cluster: CertificatesReady = %s %s: %s, want True", ready.Status, ready.Reason, ready.Message)
		case !warned:
			t.Errorf("formed %v: no %s warning: %v", formed, etcdv1alpha1.ReasonSharedClientCA, p.Events)
		}
		if p.CATrusted.Type != etcdv1alpha1.ConditionCATrusted {
			t.Errorf("formed %v: CATrusted not set: %+v", formed, p.CATrusted)
		}
	}
}
