package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// The per-cluster trust tests build certificates the way cert-manager
// lays them out: a CA Issuer's leaf Secret holds in tls.crt the leaf and
// the chain up to, not including, a self-signed root, and in ca.crt the
// top of the chain; a CA Certificate a CA ClusterIssuer signs is such a
// leaf with isCA.

// testCA is a certificate, its key and the certificate that signed it.
type testCA struct {
	cert, parent *x509.Certificate
	key          *ecdsa.PrivateKey
}

var serial int64

// newRoot is a self-signed CA, as a user's CA ClusterIssuer has.
func newRoot(t *testing.T, cn string, notBefore time.Time) testCA {
	t.Helper()
	return sign(t, nil, cn, true, notBefore)
}

// sign issues a certificate with common name cn from parent (self-signed
// when nil), valid for a year from notBefore; a leaf is valid for server
// and client auth, as the operator's server and peer certificates are.
func sign(t *testing.T, parent *testCA, cn string, isCA bool, notBefore time.Time) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notBefore.Add(365 * 24 * time.Hour),
		BasicConstraintsValid: true, IsCA: isCA, KeyUsage: x509.KeyUsageDigitalSignature}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := testCA{cert: cert, parent: cert, key: key}
	if parent != nil {
		ca.parent = parent.cert
	}
	return ca
}

func pemOf(certs ...*x509.Certificate) []byte {
	var out bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// certSecret is the Secret cert-manager fills for cert: tls.crt holds it
// and its issuer unless that is the self-signed root, ca.crt the root.
func certSecret(t *testing.T, name string, cert testCA, root *x509.Certificate) *corev1.Secret {
	t.Helper()
	kder, _ := x509.MarshalECPrivateKey(cert.key)
	chain := []*x509.Certificate{cert.cert}
	if !cert.parent.Equal(root) && !cert.parent.Equal(cert.cert) {
		chain = append(chain, cert.parent)
	}
	return tlsSecret(name, pemOf(chain...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), pemOf(root))
}

// sharedIssuerCluster is cluster name of namespace ns with issuerRef and
// peerIssuerRef naming ClusterIssuer "shared".
func sharedIssuerCluster(name string) *etcdv1alpha1.EtcdCluster {
	ref := &etcdv1alpha1.IssuerReference{Name: "shared", Kind: "ClusterIssuer"}
	c := managed(etcdv1alpha1.CertManagerSpec{IssuerRef: ref, PeerIssuerRef: ref})
	c.Name = name
	return c
}

// issued is what cert-manager holds for a cluster of the shared issuer
// once it issued everything: its CAs, intermediates of the shared root,
// and its leaves, which they sign.
type issued struct {
	clientCA, peerCA, root testCA
	client, peer           testCA
	secrets                map[string]*corev1.Secret
}

func issueFor(t *testing.T, c *etcdv1alpha1.EtcdCluster, root testCA, at time.Time) issued {
	t.Helper()
	is := issued{root: root, secrets: map[string]*corev1.Secret{}}
	is.clientCA = sign(t, &root, caCommonName(c, "client CA"), true, at)
	is.peerCA = sign(t, &root, caCommonName(c, "peer CA"), true, at)
	server := sign(t, &is.clientCA, c.Name, false, at)
	is.client = sign(t, &is.clientCA, RootCommonName, false, at)
	is.peer = sign(t, &is.peerCA, c.Name, false, at)
	for name, s := range map[string]*corev1.Secret{
		ClientCAName(c):                    certSecret(t, ClientCAName(c), is.clientCA, root.cert),
		PeerCAName(c):                      certSecret(t, PeerCAName(c), is.peerCA, root.cert),
		builder.ServerTLSSecretName(c):     certSecret(t, builder.ServerTLSSecretName(c), server, root.cert),
		builder.ClientTLSSecretName(c):     certSecret(t, builder.ClientTLSSecretName(c), is.client, root.cert),
		builder.PeerTLSSecretName(c):       certSecret(t, builder.PeerTLSSecretName(c), is.peer, root.cert),
		SigningSecretName(ClientCAName(c)): certSecret(t, SigningSecretName(ClientCAName(c)), is.clientCA, root.cert),
		SigningSecretName(PeerCAName(c)):   certSecret(t, SigningSecretName(PeerCAName(c)), is.peerCA, root.cert),
	} {
		is.secrets[name] = s
	}
	return is
}

// bundleOf is the trust bundle a plan leaves: the one it writes, else
// the previous one.
func bundleOf(p Plan, previous map[string][]byte) map[string][]byte {
	for _, w := range p.Writes {
		if s, ok := w.Object.(*corev1.Secret); ok && strings.HasSuffix(s.Name, "-ca-bundle") {
			return s.Data
		}
	}
	return previous
}

// handshake verifies a certificate chain (leaf first, as a TLS peer sends
// it) the way Go's TLS does on etcd's ports: against the pool of the CA
// file as roots, with the rest of the chain as intermediates.
func handshake(caFile []byte, chain ...*x509.Certificate) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caFile)
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// TestTrustIsPerCluster is the hole of issue 15, item 3: two clusters
// whose certificates one ClusterIssuer signs. The members of cluster a
// must accept a's root client certificate and peer certificate, and
// refuse b's, although the same issuer signed both: a's trust bundle
// (what etcd reads as --trusted-ca-file and --peer-trusted-ca-file) holds
// a's own CAs, not the issuer's. The operator before per-cluster CAs
// gathered the ca.crt of the leaf Secrets, the issuer's CA, and b's
// certificates passed.
func TestTrustIsPerCluster(t *testing.T) {
	t.Parallel()
	now := time.Now()
	root := newRoot(t, "shared root", now.Add(-time.Hour))
	a, b := sharedIssuerCluster("team-a"), sharedIssuerCluster("team-b")
	ia, ib := issueFor(t, a, root, now.Add(-time.Hour)), issueFor(t, b, root, now.Add(-time.Hour))

	p := PlanCertificates(Observed{Cluster: a, CertManager: true, Secrets: ia.secrets, Certificates: readyCertificates(a), Now: now})
	bundle := bundleOf(p, nil)
	for _, key := range []string{builder.BundleServerCAKey, builder.BundleClientCAKey, builder.BundlePeerCAKey} {
		if holds(bundle[key], root.cert) || len(parseValid(bundle[key])) != 1 {
			t.Errorf("a's bundle %s holds %s, want a's own CA only", key, subjects(bundle[key]))
		}
	}
	for _, tc := range []struct {
		what   string
		caFile string
		chain  []*x509.Certificate
		accept bool
	}{
		{"a's root client certificate", builder.BundleClientCAKey, []*x509.Certificate{ia.client.cert, ia.clientCA.cert}, true},
		{"a's peer certificate", builder.BundlePeerCAKey, []*x509.Certificate{ia.peer.cert, ia.peerCA.cert}, true},
		{"b's root client certificate", builder.BundleClientCAKey, []*x509.Certificate{ib.client.cert, ib.clientCA.cert}, false},
		{"b's root client certificate with the shared root", builder.BundleClientCAKey, []*x509.Certificate{ib.client.cert, ib.clientCA.cert, root.cert}, false},
		{"b's peer certificate", builder.BundlePeerCAKey, []*x509.Certificate{ib.peer.cert, ib.peerCA.cert}, false},
		{"a's client CA as a peer", builder.BundlePeerCAKey, []*x509.Certificate{ia.client.cert, ia.clientCA.cert}, false},
	} {
		err := handshake(bundle[tc.caFile], tc.chain...)
		if (err == nil) != tc.accept {
			t.Errorf("a's members verifying %s with %s: %v, want accepted %v", tc.what, tc.caFile, err, tc.accept)
		}
	}
	if p.CertificatesReady.Status != metav1.ConditionTrue {
		t.Errorf("CertificatesReady = %s: %s", p.CertificatesReady.Reason, p.CertificatesReady.Message)
	}
}

// TestUpgradeFromSharedIssuer walks a cluster whose leaves an operator
// before per-cluster CAs had the user's issuer sign (its bundle holds the
// issuer's CA) to a bundle of its own CAs only: the issuer's CA stays
// while a leaf, the cluster's or a tenant's, is not signed by the
// cluster's own CA, and until the renewed leaves had time to reach the
// Pods; a renewed CA of the cluster's own is never taken for the
// issuer's, and the one that signed the leaves in use stays.
func TestUpgradeFromSharedIssuer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := managed(etcdv1alpha1.CertManagerSpec{IssuerRef: &etcdv1alpha1.IssuerReference{Name: "shared", Kind: "ClusterIssuer"}})
	c.Status.ClusterID = "1f2e" // a running cluster
	root := newRoot(t, "shared root", now.Add(-48*time.Hour))
	peerCA := newRoot(t, caCommonName(c, "peer CA"), now.Add(-48*time.Hour))
	// Before the upgrade: the leaves came straight from the shared root.
	legacyServer := sign(t, &root, c.Name, false, now.Add(-24*time.Hour))
	legacyClient := sign(t, &root, RootCommonName, false, now.Add(-24*time.Hour))
	legacyTenant := sign(t, &root, "tenant-t", false, now.Add(-24*time.Hour))
	peer := sign(t, &peerCA, c.Name, false, now.Add(-24*time.Hour))
	legacyBundle := map[string][]byte{builder.BundleServerCAKey: pemOf(root.cert), builder.BundleClientCAKey: pemOf(root.cert), builder.BundlePeerCAKey: pemOf(peerCA.cert)}
	// After: the cluster's client CA, an intermediate of the shared root.
	clientCA := sign(t, &root, caCommonName(c, "client CA"), true, now.Add(-20*time.Minute))
	renewedCA := sign(t, &root, caCommonName(c, "client CA"), true, now.Add(-10*time.Minute))
	fromCA := func(ca testCA, cn string, age time.Duration) testCA { return sign(t, &ca, cn, false, now.Add(-age)) }

	type leaves struct{ server, client, tenant testCA }
	tests := []struct {
		name     string
		ca       *testCA // the cluster's client CA in its Secret, nil before cert-manager issues it
		previous map[string][]byte
		leaves   leaves
		want     []*x509.Certificate // client-ca.crt after the pass
		server   []*x509.Certificate // ca.crt after the pass, when not want
		wait     time.Duration       // how soon the plan looks again, about
	}{
		{name: "before the cluster's CA is issued: the issuer's CA stays", previous: legacyBundle,
			leaves: leaves{legacyServer, legacyClient, legacyTenant}, want: []*x509.Certificate{root.cert}},
		{name: "the cluster's CA issued, the leaves not yet renewed: both", ca: &clientCA, previous: legacyBundle,
			leaves: leaves{legacyServer, legacyClient, legacyTenant}, want: []*x509.Certificate{root.cert, clientCA.cert}},
		{name: "a tenant's certificate still from the issuer: both", ca: &clientCA, previous: legacyBundle,
			leaves: leaves{fromCA(clientCA, c.Name, time.Hour), fromCA(clientCA, RootCommonName, time.Hour), legacyTenant}, want: []*x509.Certificate{root.cert, clientCA.cert},
			server: []*x509.Certificate{clientCA.cert}},
		{name: "the server certificate renewed a minute ago: both, until it reached the Pods", ca: &clientCA, previous: legacyBundle,
			leaves: leaves{fromCA(clientCA, c.Name, time.Minute), fromCA(clientCA, RootCommonName, time.Hour), fromCA(clientCA, "tenant-t", time.Hour)},
			want:   []*x509.Certificate{root.cert, clientCA.cert}, wait: leafPropagation - time.Minute},
		{name: "every leaf from the cluster's CA for a while: the issuer's CA goes", ca: &clientCA, previous: legacyBundle,
			leaves: leaves{fromCA(clientCA, c.Name, time.Hour), fromCA(clientCA, RootCommonName, time.Hour), fromCA(clientCA, "tenant-t", time.Hour)},
			want:   []*x509.Certificate{clientCA.cert}},
		{name: "a renewed CA of the cluster's own keeps the one it replaces", ca: &renewedCA,
			previous: map[string][]byte{builder.BundleServerCAKey: pemOf(clientCA.cert), builder.BundleClientCAKey: pemOf(clientCA.cert), builder.BundlePeerCAKey: pemOf(peerCA.cert)},
			leaves:   leaves{fromCA(clientCA, c.Name, time.Hour), fromCA(clientCA, RootCommonName, time.Hour), fromCA(clientCA, "tenant-t", time.Hour)},
			want:     []*x509.Certificate{clientCA.cert, renewedCA.cert}},
		{name: "a bundle gathered anew keeps the CA that signed the leaves", ca: &renewedCA,
			leaves: leaves{fromCA(clientCA, c.Name, time.Hour), fromCA(clientCA, RootCommonName, time.Hour), fromCA(clientCA, "tenant-t", time.Hour)},
			want:   []*x509.Certificate{clientCA.cert, renewedCA.cert}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secrets := map[string]*corev1.Secret{
				builder.ServerTLSSecretName(c):   certSecret(t, builder.ServerTLSSecretName(c), tt.leaves.server, root.cert),
				builder.ClientTLSSecretName(c):   certSecret(t, builder.ClientTLSSecretName(c), tt.leaves.client, root.cert),
				builder.PeerTLSSecretName(c):     certSecret(t, builder.PeerTLSSecretName(c), peer, peerCA.cert),
				PeerCAName(c):                    certSecret(t, PeerCAName(c), peerCA, peerCA.cert),
				builder.TrustBundleSecretName(c): TrustBundleSecret(c, tt.previous),
			}
			if tt.ca != nil {
				secrets[ClientCAName(c)] = certSecret(t, ClientCAName(c), *tt.ca, root.cert)
			}
			tenant := certSecret(t, "t-client-tls", tt.leaves.tenant, root.cert)
			p := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: secrets, TenantSecrets: []*corev1.Secret{tenant}, MemberTrustHashes: []string{"started"}, Now: now})
			bundle := bundleOf(p, tt.previous)
			server := tt.server
			if server == nil {
				server = tt.want
			}
			for key, want := range map[string][]*x509.Certificate{builder.BundleClientCAKey: tt.want, builder.BundleServerCAKey: server} {
				if got := bundle[key]; !bytes.Equal(got, encode(want)) {
					t.Errorf("%s holds %s, want %s", key, subjects(got), subjects(pemOf(want...)))
				}
			}
			if got := bundle[builder.BundlePeerCAKey]; !bytes.Equal(got, pemOf(peerCA.cert)) {
				t.Errorf("peer-ca.crt holds %s, want the cluster's peer CA", subjects(got))
			}
			if tt.wait > 0 && (p.Recheck < tt.wait-time.Second || p.Recheck > tt.wait+2*time.Second) {
				t.Errorf("the plan looks again in %s, want about %s", p.Recheck, tt.wait)
			}
		})
	}
}

// readyCertificates are the Certificates of c, all issued.
func readyCertificates(c *etcdv1alpha1.EtcdCluster) map[string]*cmapi.Certificate {
	certs := map[string]*cmapi.Certificate{}
	for _, want := range Certificates(c) {
		got := want.DeepCopy()
		got.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue}}
		certs[got.Name] = got
	}
	return certs
}

// holds tells whether a PEM bundle holds cert.
func holds(data []byte, cert *x509.Certificate) bool {
	for _, c := range parseValid(data) {
		if c.Equal(cert) {
			return true
		}
	}
	return false
}

// subjects names the certificates of a PEM bundle, for messages.
func subjects(data []byte) string {
	var out []string
	for _, c := range parseValid(data) {
		out = append(out, c.Subject.CommonName)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// TestIssuerCannotSignCA checks that a user's issuer that cannot sign the
// cluster's CA (it fails, or ignores isCA and returns a leaf) is named in
// CertificatesReady with the field and what to do, and that such a
// certificate neither signs nor enters the trust bundle.
func TestIssuerCannotSignCA(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := sharedIssuerCluster("e")
	root := newRoot(t, "shared root", now.Add(-time.Hour))
	is := issueFor(t, c, root, now.Add(-time.Hour))
	notCA := map[string]*corev1.Secret{}
	for k, v := range is.secrets {
		notCA[k] = v
	}
	delete(notCA, SigningSecretName(ClientCAName(c)))
	notCA[ClientCAName(c)] = certSecret(t, ClientCAName(c), sign(t, &root, caCommonName(c, "client CA"), false, now.Add(-time.Hour)), root.cert)

	failed := readyCertificates(c)
	failed["e-peer-ca"].Status.LastFailureTime = &metav1.Time{Time: now}
	failed["e-peer-ca"].Status.Conditions = []cmapi.CertificateCondition{
		{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionFalse, Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist"},
		{Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionFalse, Reason: "Failed", Message: "The certificate request has failed to complete and will be retried: role does not allow CA certificates"},
	}
	withoutPeerCA := map[string]*corev1.Secret{}
	for k, v := range is.secrets {
		if !strings.HasPrefix(k, "e-peer-ca") {
			withoutPeerCA[k] = v
		}
	}

	tests := []struct {
		name     string
		secrets  map[string]*corev1.Secret
		certs    map[string]*cmapi.Certificate
		wantSays []string
	}{
		{name: "a certificate that cannot sign", secrets: notCA, certs: readyCertificates(c), wantSays: []string{
			"Certificate e-ca, the CA of this cluster's own that signs its server and client certificates, came back from ClusterIssuer shared unable to sign: it is not a CA certificate",
			"The issuer of spec.security.tls.certManager.issuerRef must sign CA certificates (isCA)", "remove spec.security.tls.certManager.issuerRef",
		}},
		{name: "an issuance that failed", secrets: withoutPeerCA, certs: failed, wantSays: []string{
			"ClusterIssuer shared could not issue Certificate e-peer-ca, the CA of this cluster's own that signs its peer certificates (Failed: The certificate request has failed to complete and will be retried: role does not allow CA certificates)",
			"spec.security.tls.certManager.peerIssuerRef",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: tt.secrets, Certificates: tt.certs, Now: now})
			got := p.CertificatesReady
			if got.Status != metav1.ConditionFalse || got.Reason != etcdv1alpha1.ReasonIssuerCannotSignCA {
				t.Fatalf("CertificatesReady = %s %s: %s, want False %s", got.Status, got.Reason, got.Message, etcdv1alpha1.ReasonIssuerCannotSignCA)
			}
			for _, says := range tt.wantSays {
				if !strings.Contains(got.Message, says) {
					t.Errorf("CertificatesReady says %q, want it to say %q", got.Message, says)
				}
			}
			if len(p.Events) == 0 || p.Events[len(p.Events)-1].Reason != etcdv1alpha1.ReasonIssuerCannotSignCA {
				t.Errorf("no warning event: %v", p.Events)
			}
			for _, w := range p.Writes {
				if w.Object.GetName() == SigningSecretName(ClientCAName(c)) && tt.secrets[SigningSecretName(ClientCAName(c))] == nil {
					t.Error("a certificate that cannot sign is made the signing copy")
				}
			}
			if ca := tt.secrets[ClientCAName(c)]; ca != nil {
				leaf := parseValid(ca.Data[builder.CertKey])[0]
				if holds(bundleOf(p, nil)[builder.BundleClientCAKey], leaf) != (NotCA(leaf) == "") {
					t.Error("the trust bundle takes in a certificate that cannot sign")
				}
			}
		})
	}
}

// TestNewCAOfRunningCluster checks the trust gate for a CA that has no
// signing copy yet on a running cluster: it signs at once only when the
// members already take what it signs (it chains to a CA of the bundle
// they run with, as after an upgrade from leaves the user's issuer
// signed); otherwise it waits for the roll like a renewed CA, and the
// leaves waiting for it do not hold the roll back while their Secrets
// hold valid certificates.
func TestNewCAOfRunningCluster(t *testing.T) {
	t.Parallel()
	now := time.Now()
	root := newRoot(t, "shared root", now.Add(-48*time.Hour))
	withIssuer := managed(etcdv1alpha1.CertManagerSpec{IssuerRef: &etcdv1alpha1.IssuerReference{Name: "shared", Kind: "ClusterIssuer"}})
	withoutIssuer := managed(etcdv1alpha1.CertManagerSpec{}) // issuerRef removed
	peerCA := newRoot(t, caCommonName(withIssuer, "peer CA"), now.Add(-48*time.Hour))
	intermediate := sign(t, &root, caCommonName(withIssuer, "client CA"), true, now.Add(-time.Minute))
	selfSignedCA := newRoot(t, caCommonName(withIssuer, "client CA"), now.Add(-time.Minute))
	// The members run with the bundle of the upgraded operator's
	// predecessor: the shared root for clients, the cluster's peer CA.
	previous := map[string][]byte{builder.BundleServerCAKey: pemOf(root.cert), builder.BundleClientCAKey: pemOf(root.cert), builder.BundlePeerCAKey: pemOf(peerCA.cert)}

	tests := []struct {
		name        string
		cluster     *etcdv1alpha1.EtcdCluster
		ca          testCA
		allTrust    bool // every member Pod runs with the bundle this pass gathers
		noLeaf      bool // the server certificate's Secret is gone
		wantSigned  bool
		wantReady   metav1.ConditionStatus
		wantWaiting string
	}{
		{name: "a CA that chains to the issuer's CA the members trust signs at once", cluster: withIssuer, ca: intermediate, wantSigned: true, wantReady: metav1.ConditionFalse, wantWaiting: "Certificate e-server-tls is not issued yet"},
		{name: "a CA the members cannot verify waits for the roll, which goes on", cluster: withoutIssuer, ca: selfSignedCA, wantReady: metav1.ConditionTrue},
		{name: "once every member trusts it, it signs", cluster: withoutIssuer, ca: selfSignedCA, allTrust: true, wantSigned: true, wantReady: metav1.ConditionFalse, wantWaiting: "Certificate e-server-tls is not issued yet"},
		{name: "a leaf without a valid Secret is waited for all the same", cluster: withoutIssuer, ca: selfSignedCA, noLeaf: true, wantReady: metav1.ConditionFalse, wantWaiting: "Certificate e-server-tls is not issued yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.cluster.DeepCopy()
			c.Status.ClusterID = "1f2e"
			// The leaves the predecessor had the shared root sign; their
			// Certificates wait for Issuer e-ca, which has no signing copy.
			secrets := map[string]*corev1.Secret{
				builder.ServerTLSSecretName(c):   certSecret(t, builder.ServerTLSSecretName(c), sign(t, &root, c.Name, false, now.Add(-24*time.Hour)), root.cert),
				builder.ClientTLSSecretName(c):   certSecret(t, builder.ClientTLSSecretName(c), sign(t, &root, RootCommonName, false, now.Add(-24*time.Hour)), root.cert),
				builder.PeerTLSSecretName(c):     certSecret(t, builder.PeerTLSSecretName(c), sign(t, &peerCA, c.Name, false, now.Add(-24*time.Hour)), peerCA.cert),
				PeerCAName(c):                    certSecret(t, PeerCAName(c), peerCA, peerCA.cert),
				SigningSecretName(PeerCAName(c)): certSecret(t, SigningSecretName(PeerCAName(c)), peerCA, peerCA.cert),
				ClientCAName(c):                  certSecret(t, ClientCAName(c), tt.ca, root.cert),
				builder.TrustBundleSecretName(c): TrustBundleSecret(c, previous),
			}
			if tt.noLeaf {
				delete(secrets, builder.ServerTLSSecretName(c))
			}
			certs := readyCertificates(c)
			for _, leaf := range []string{builder.ServerTLSSecretName(c), builder.ClientTLSSecretName(c)} {
				certs[leaf].Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionFalse, Reason: "Pending", Message: "Issuer e-ca is not ready"}}
			}
			// The bundle this pass gathers, for the members' hashes.
			first := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: secrets, Certificates: certs, MemberTrustHashes: []string{"old", "old", "old"}, Now: now})
			hash := "old"
			if tt.allTrust {
				hash = builder.TrustBundleHash(bundleOf(first, previous))
			}
			p := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: secrets, Certificates: certs, MemberTrustHashes: []string{hash, hash, hash}, Now: now})
			if got := slices.Contains(signed(p), ClientCAName(c)); got != tt.wantSigned {
				t.Errorf("the plan lets e-ca sign: %v, want %v (CATrusted: %s)", got, tt.wantSigned, p.CATrusted.Message)
			}
			if got := p.CertificatesReady; got.Status != tt.wantReady || !strings.Contains(got.Message, tt.wantWaiting) {
				t.Errorf("CertificatesReady = %s %s: %s, want %s saying %q", got.Status, got.Reason, got.Message, tt.wantReady, tt.wantWaiting)
			}
			if !tt.wantSigned && !strings.Contains(p.CATrusted.Message, ClientCAName(c)) {
				t.Errorf("CATrusted does not name the held CA: %s", p.CATrusted.Message)
			}
		})
	}
}
