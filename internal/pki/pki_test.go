package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

func managed(cm etcdv1alpha1.CertManagerSpec) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", UID: "uid"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{CertManager: &cm}}},
	}
}

func names[T interface{ GetName() string }](objs []T) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

// TestIssuersAndCertificates checks that every cluster has CAs of its
// own, whoever signs them, and that they sign every leaf: a user's issuer
// signs the cluster's CA, never a leaf (trust is per cluster).
func TestIssuersAndCertificates(t *testing.T) {
	t.Parallel()
	own := []string{"e-ca", "e-peer-ca", "e-server-tls", "e-peer-tls", "e-client-tls"}
	tests := []struct {
		name                 string
		spec                 etcdv1alpha1.CertManagerSpec
		issuers              []string
		clientCAFrom, peerCA string // the issuers of the cluster's CAs
	}{
		{"own self-signed CAs for peers and clients", etcdv1alpha1.CertManagerSpec{},
			[]string{"e-selfsigned", "e-ca", "e-peer-ca"}, "Issuer/e-selfsigned", "Issuer/e-selfsigned"},
		{"the user's issuer signs the client CA; the peer CA is self-signed", etcdv1alpha1.CertManagerSpec{IssuerRef: &etcdv1alpha1.IssuerReference{Name: "corp", Kind: "ClusterIssuer"}},
			[]string{"e-selfsigned", "e-ca", "e-peer-ca"}, "ClusterIssuer/corp", "Issuer/e-selfsigned"},
		{"the user's issuers sign both CAs", etcdv1alpha1.CertManagerSpec{IssuerRef: &etcdv1alpha1.IssuerReference{Name: "corp"}, PeerIssuerRef: &etcdv1alpha1.IssuerReference{Name: "peers", Kind: "Issuer"}},
			[]string{"e-ca", "e-peer-ca"}, "Issuer/corp", "Issuer/peers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := managed(tt.spec)
			if got := names(Issuers(c)); !reflect.DeepEqual(got, tt.issuers) {
				t.Errorf("issuers %v, want %v", got, tt.issuers)
			}
			certs := Certificates(c)
			if got := names(certs); !reflect.DeepEqual(got, own) {
				t.Errorf("certificates %v, want %v", got, own)
			}
			byName := map[string]*cmapi.Certificate{}
			for _, cert := range certs {
				byName[cert.Name] = cert
				if cert.Namespace != "ns" || len(cert.OwnerReferences) != 1 || cert.OwnerReferences[0].UID != "uid" || cert.Spec.SecretName != cert.Name {
					t.Errorf("%s: namespace, owner or Secret wrong: %+v", cert.Name, cert.ObjectMeta)
				}
				if cert.Spec.IssuerRef.Group != "cert-manager.io" {
					t.Errorf("%s: issuer group %q", cert.Name, cert.Spec.IssuerRef.Group)
				}
			}
			ref := func(n string) string {
				r := byName[n].Spec.IssuerRef
				return r.Kind + "/" + r.Name
			}
			for ca, want := range map[string]string{"e-ca": tt.clientCAFrom, "e-peer-ca": tt.peerCA} {
				if got := ref(ca); got != want || !byName[ca].Spec.IsCA {
					t.Errorf("CA %s: issuer %s, isCA %v; want %s, true", ca, got, byName[ca].Spec.IsCA, want)
				}
			}
			for leaf, want := range map[string]string{"e-server-tls": "Issuer/e-ca", "e-client-tls": "Issuer/e-ca", "e-peer-tls": "Issuer/e-peer-ca"} {
				if got := ref(leaf); got != want {
					t.Errorf("%s issuer %s, want %s", leaf, got, want)
				}
			}
			tenant := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: "e"}}
			if got := TenantCertificate(c, tenant).Spec.IssuerRef; got.Kind+"/"+got.Name != "Issuer/e-ca" {
				t.Errorf("tenant certificate issuer %s/%s, want Issuer/e-ca", got.Kind, got.Name)
			}
			client := byName["e-client-tls"]
			if client.Spec.CommonName != "root" || !reflect.DeepEqual(client.Spec.Usages, []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment, cmapi.UsageClientAuth}) {
				t.Errorf("client certificate: %+v", client.Spec)
			}
		})
	}
}

func TestSANs(t *testing.T) {
	t.Parallel()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	var server, peer *cmapi.Certificate
	for _, cert := range Certificates(c) {
		switch cert.Name {
		case builder.ServerTLSSecretName(c):
			server = cert
		case builder.PeerTLSSecretName(c):
			peer = cert
		}
	}
	wantServer := []string{"*.e-headless.ns.svc", "*.e-headless.ns.svc.cluster.local", "e", "e.ns", "e.ns.svc", "e.ns.svc.cluster.local", "localhost"}
	if !reflect.DeepEqual(server.Spec.DNSNames, wantServer) || !reflect.DeepEqual(server.Spec.IPAddresses, []string{"127.0.0.1", "::1"}) {
		t.Errorf("server SANs %v %v", server.Spec.DNSNames, server.Spec.IPAddresses)
	}
	if !reflect.DeepEqual(peer.Spec.DNSNames, []string{"*.e-headless.ns.svc", "*.e-headless.ns.svc.cluster.local"}) || peer.Spec.IPAddresses != nil {
		t.Errorf("peer SANs %v %v", peer.Spec.DNSNames, peer.Spec.IPAddresses)
	}
}

func TestNeeds(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
		PeerSecret: "peer", PeerTrustedCASecret: "ca", ServerSecret: "server", ServerTrustedCASecret: "ca", ClientSecret: "client", ClientTrustedCASecret: "ca",
	}}}}
	got := Needs(builder.CertificateSourcesOf(c))
	want := []Need{{"ca", []string{"ca.crt"}}, {"client", []string{"tls.crt", "tls.key"}}, {"peer", []string{"tls.crt", "tls.key"}}, {"server", []string{"tls.crt", "tls.key"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Needs = %v, want %v", got, want)
	}
	if got := Needs(builder.CertificateSourcesOf(managed(etcdv1alpha1.CertManagerSpec{}))); len(got) != 3 || !reflect.DeepEqual(got[0].Keys, []string{"ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("managed Needs = %v", got)
	}
}

// selfSigned returns a self-signed CA certificate and its key, in PEM,
// expiring at notAfter.
func selfSigned(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestCheck(t *testing.T) {
	t.Parallel()
	expiry := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	cert, key := selfSigned(t, expiry)
	otherCert, _ := selfSigned(t, expiry)
	secret := func(data map[string][]byte) *corev1.Secret { return &corev1.Secret{Data: data} }
	pair := Need{Secret: "s", Keys: []string{"ca.crt", "tls.crt", "tls.key"}}
	tests := []struct {
		name   string
		need   Need
		secret *corev1.Secret
		want   string
	}{
		{"missing", pair, nil, "Secret s does not exist"},
		{"no key", pair, secret(map[string][]byte{"tls.crt": cert, "ca.crt": cert}), "Secret s has no tls.key"},
		{"no key and no CA", pair, secret(map[string][]byte{"tls.crt": cert}), "Secret s has no ca.crt and no tls.key"},
		{"not PEM", pair, secret(map[string][]byte{"tls.crt": []byte("junk"), "tls.key": key, "ca.crt": cert}), "Secret s: tls.crt: no PEM certificate"},
		{"mismatched key", pair, secret(map[string][]byte{"tls.crt": otherCert, "tls.key": key, "ca.crt": cert}), "Secret s: tls.crt and tls.key are not a certificate and its key"},
		{"CA only", Need{Secret: "s", Keys: []string{"ca.crt"}}, secret(map[string][]byte{"ca.crt": cert}), ""},
		{"valid", pair, secret(map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Check(tt.need, tt.secret)
			if tt.want == "" {
				if err != nil || !got.Equal(expiry) {
					t.Fatalf("Check = %v, %v; want %v", got, err, expiry)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	t.Parallel()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := Condition(c, "", nil, now.Add(72*time.Hour), now)
	if ok.Status != metav1.ConditionTrue || ok.Reason != etcdv1alpha1.ReasonCertificatesReady || ok.ObservedGeneration != 4 || !strings.Contains(ok.Message, "nearest expires at 2030-01-04T00:00:00Z") {
		t.Errorf("ready: %+v", ok)
	}
	bad := Condition(c, etcdv1alpha1.ReasonSecretInvalid, []string{"Secret a does not exist", "Secret b has no tls.key"}, time.Time{}, now)
	if bad.Status != metav1.ConditionFalse || bad.Reason != etcdv1alpha1.ReasonSecretInvalid || bad.Message != "Secret a does not exist; Secret b has no tls.key" {
		t.Errorf("not ready: %+v", bad)
	}
}

// TestCACommonNames checks that the CAs' common names are kept as they
// were whenever they fit (so that no existing CA is reissued), and cut to
// fit otherwise.
func TestCACommonNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, namespace, role, want string }{
		{"e", "ns", "client CA", "e.ns etcd client CA"},
		{"e", "ns", "peer CA", "e.ns etcd peer CA"},
		{strings.Repeat("a", 30), strings.Repeat("n", 19), "peer CA", strings.Repeat("a", 30) + "." + strings.Repeat("n", 19) + " etcd peer CA"},
		{strings.Repeat("a", 30), strings.Repeat("n", 30), "client CA", strings.Repeat("a", 30) + "." + strings.Repeat("n", 18) + " etcd client CA"},
		{strings.Repeat("a", 48), "ns", "client CA", strings.Repeat("a", 48) + " etcd client CA"},
		{strings.Repeat("a", 50), strings.Repeat("n", 63), "client CA", strings.Repeat("a", 49) + " etcd client CA"},
	}
	for _, tt := range tests {
		c := managed(etcdv1alpha1.CertManagerSpec{})
		c.Name, c.Namespace = tt.name, tt.namespace
		got := caCommonName(c, tt.role)
		if got != tt.want {
			t.Errorf("caCommonName(%d-character name, %d-character namespace, %s) = %q, want %q", len(tt.name), len(tt.namespace), tt.role, got, tt.want)
		}
		if len(got) > maxCommonName {
			t.Errorf("%q has %d characters, more than %d", got, len(got), maxCommonName)
		}
	}
}
