package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/pki"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// tlsClient connects to a cluster through its client Service with the CA
// and, when cert is given, the client certificate.
func tlsClient(ctx context.Context, t *testing.T, ns, name string, roots *x509.CertPool, cert *tls.Certificate) *clientv3.Client {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: name + "." + ns + ".svc", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + net.JoinHostPort(svc.Spec.ClusterIP, "2379")},
		DialTimeout: 5 * time.Second,
		TLS:         cfg,
		Logger:      zap.NewNop(),
		// gRPC checks the certificate against the authority, not
		// tls.Config.ServerName: name the Service the certificate covers.
		DialOptions: []grpc.DialOption{grpc.WithAuthority(cfg.ServerName)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// secretPair reads a certificate Secret: its key pair and a pool of its
// ca.crt.
func secretPair(ctx context.Context, t *testing.T, ns, name string) (*tls.Certificate, *x509.CertPool) {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("Secret %s has no ca.crt", name)
	}
	return &pair, pool
}

// foreignClientCert is a client certificate with CN root from a CA the
// cluster has never seen.
func foreignClientCert(t *testing.T) *tls.Certificate {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foreign CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "root"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// assertTLSAccess checks that a client with the cluster's client
// certificate reads and writes, and that one without a certificate, or
// with one from another CA, is refused.
func assertTLSAccess(ctx context.Context, t *testing.T, ns, name string, roots *x509.CertPool, cert *tls.Certificate) {
	t.Helper()
	good := tlsClient(ctx, t, ns, name, roots, cert)
	support.Eventually(t, time.Minute, "a write and a read with the client certificate", func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := good.Put(cctx, "/tls/key", "value"); err != nil {
			return err
		}
		resp, err := good.Get(cctx, "/tls/key")
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "value" {
			return fmt.Errorf("read back %v", resp.Kvs)
		}
		return nil
	})
	for what, c := range map[string]*tls.Certificate{"no client certificate": nil, "a client certificate of another CA": foreignClientCert(t)} {
		cli := tlsClient(ctx, t, ns, name, roots, c)
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cli.Put(cctx, "/tls/intruder", "x")
		cancel()
		if err == nil {
			t.Errorf("a client with %s could write", what)
			continue
		}
		// The refusal itself is a TLS alert: with TLS 1.3 it arrives on
		// the first read after the handshake.
		alert := tlsRefusal(ctx, t, ns, name, roots, c)
		if !strings.Contains(alert, "tls:") {
			t.Errorf("a client with %s: the TLS handshake ended with %q, want a TLS alert", what, alert)
		}
		t.Logf("a client with %s is refused: %v (TLS: %s)", what, err, alert)
	}
}

// tlsRefusal is how a member ends a TLS connection from a client with cert
// (nil for none) through the client Service, or "accepted".
func tlsRefusal(ctx context.Context, t *testing.T, ns, name string, roots *x509.CertPool, cert *tls.Certificate) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: name + "." + ns + ".svc", MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "2379"), cfg)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return err.Error()
	}
	return "accepted"
}

// assertServedChain checks, at the TLS level, the certificate a member
// serves on the client Service: it chains to the CA and names the
// members, the Service and localhost.
func assertServedChain(ctx context.Context, t *testing.T, ns, name string, roots *x509.CertPool, cert *tls.Certificate) {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "2379"),
		&tls.Config{RootCAs: roots, ServerName: name + "." + ns + ".svc", Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with the client Service: %v", err)
	}
	defer func() { _ = conn.Close() }()
	st := conn.ConnectionState()
	if len(st.VerifiedChains) == 0 {
		t.Fatal("the served certificate does not chain to the CA")
	}
	leaf := st.PeerCertificates[0]
	headless := fmt.Sprintf("*.%s-headless.%s.svc", name, ns)
	for _, want := range []string{headless, headless + ".cluster.local", name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local", "localhost"} {
		if !slices.Contains(leaf.DNSNames, want) {
			t.Errorf("served certificate lacks SAN %s: %v", want, leaf.DNSNames)
		}
	}
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
		t.Errorf("served certificate lacks IP SAN 127.0.0.1: %v", leaf.IPAddresses)
	}
	for _, member := range []string{name + "-0", name + "-1"} {
		if err := leaf.VerifyHostname(member + "." + name + "-headless." + ns + ".svc"); err != nil {
			t.Errorf("served certificate does not cover member %s: %v", member, err)
		}
	}
	t.Logf("served chain: %s <- %s, %d SANs, expires %s", leaf.Subject.CommonName, st.VerifiedChains[0][len(st.VerifiedChains[0])-1].Subject.CommonName, len(leaf.DNSNames)+len(leaf.IPAddresses), leaf.NotAfter.Format(time.RFC3339))
}

// assertPeersUseTLS checks that a member's peer port serves TLS with a
// certificate of the peer CA and refuses a plain-HTTP peer.
func assertPeersUseTLS(ctx context.Context, t *testing.T, ns, name string, peerCert *tls.Certificate, peerRoots *x509.CertPool) {
	t.Helper()
	pod := &corev1.Pod{}
	member := name + "-0"
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, pod); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(pod.Status.PodIP, "2380")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: peerRoots, ServerName: member + "." + name + "-headless." + ns + ".svc", Certificates: []tls.Certificate{*peerCert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with %s's peer port: %v", member, err)
	}
	_ = conn.Close()
	plain, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	_ = plain.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = fmt.Fprintf(plain, "GET /members HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 64)
	n, _ := plain.Read(buf)
	if strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Errorf("peer port of %s answers plain HTTP: %q", member, buf[:n])
	}
}

// assertNoPods checks that a cluster has no member Pods.
func assertNoPods(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelCluster: name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("the cluster has %d Pods while its certificates are not ready", len(pods.Items))
	}
}

// TestTLSOperatorManaged brings up a cluster whose certificates the
// operator has cert-manager issue, and checks it with real TLS clients.
func TestTLSOperatorManaged(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Security: &etcdv1alpha1.SecuritySpec{
			TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}},
		}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	took := awaitReady(ctx, t, key, 3)
	t.Logf("managed-TLS cluster Ready with 3 members in %s", took.Round(time.Second))
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "nearest expires at")

	cert, roots := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
	if leaf, _ := x509.ParseCertificate(cert.Certificate[0]); leaf.Subject.CommonName != "root" {
		t.Errorf("operator's client certificate has CN %q, want root", leaf.Subject.CommonName)
	}
	assertTLSAccess(ctx, t, ns, c.Name, roots, cert)
	assertServedChain(ctx, t, ns, c.Name, roots, cert)
	peerCert, peerRoots := secretPair(ctx, t, ns, builder.PeerTLSSecretName(c))
	assertPeersUseTLS(ctx, t, ns, c.Name, peerCert, peerRoots)
	if peerRoots.Equal(roots) {
		t.Error("peer and client traffic share a CA")
	}
	assertMembers(ctx, t, tlsClient(ctx, t, ns, c.Name, roots, cert), ns, 3)
	assertAuthToggles(ctx, t, c, roots, cert)
	assertRenewalWithoutDowntime(ctx, t, c, roots, cert)
	assertCARotation(ctx, t, c)
}

// TestTLSForeignSecretIsKept creates, before a cluster whose certificates
// cert-manager issues, a Secret of the name its server certificate would
// take: cert-manager would overwrite it, so the operator creates no
// Certificate, says why in CertificatesReady and starts no Pod, and the
// Secret keeps its data; once its owner deletes it, the cluster comes up.
func TestTLSForeignSecretIsKept(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept-server-tls"}, Data: map[string][]byte{"password": []byte("theirs")}}
	if err := k8sClient.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Security: &etcdv1alpha1.SecuritySpec{
			TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}},
		}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, "Secret kept-server-tls exists and is not this cluster's")
	// Give cert-manager the time it would need to overwrite the Secret.
	time.Sleep(10 * time.Second)
	assertNoPods(ctx, t, ns, c.Name)
	got := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["password"]) != "theirs" || len(got.Data) != 1 {
		t.Fatalf("the user's Secret was changed: %v", got.Data)
	}
	cert := &cmapi.Certificate{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept-server-tls"}, cert); err == nil {
		t.Fatal("a Certificate was created for the user's Secret")
	}
	if err := k8sClient.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	awaitReady(ctx, t, key, 1)
}

// assertAuthToggles turns spec.security.enableAuth on: a client whose
// certificate (from the cluster's client CA) names another user cannot
// write, root (the operator's certificate) can; turned off, anyone the CA
// vouches for writes again.
func assertAuthToggles(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, roots *x509.CertPool, root *tls.Certificate) {
	t.Helper()
	key := client.ObjectKeyFromObject(c)
	alice := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "alice"}, Spec: cmapi.CertificateSpec{
		CommonName: "alice", SecretName: "alice", Usages: []cmapi.KeyUsage{cmapi.UsageClientAuth},
		IssuerRef: cmmeta.IssuerReference{Name: pki.ClientCAName(c), Kind: "Issuer", Group: "cert-manager.io"},
	}}
	if err := k8sClient.Create(ctx, alice); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, time.Minute, "cert-manager to issue alice's certificate", func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "alice"}, &corev1.Secret{})
	})
	aliceCert, _ := secretPair(ctx, t, key.Namespace, "alice")
	aliceCli := tlsClient(ctx, t, key.Namespace, key.Name, roots, aliceCert)
	rootCli := tlsClient(ctx, t, key.Namespace, key.Name, roots, root)
	put := func(cli *clientv3.Client) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cli.Put(cctx, "/auth/key", "v")
		return err
	}
	if err := put(aliceCli); err != nil {
		t.Fatalf("alice cannot write with auth off: %v", err)
	}

	setAuth := func(on bool) {
		t.Helper()
		if err := k8sClient.Get(ctx, key, c); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Security.EnableAuth = on
		if err := k8sClient.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
	}
	setAuth(true)
	took := awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionTrue)
	t.Logf("authentication on %s after enableAuth", took.Round(100*time.Millisecond))
	if err := put(aliceCli); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("alice writing with auth on: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	if err := put(rootCli); err != nil {
		t.Errorf("root cannot write with auth on: %v", err)
	}
	awaitReady(ctx, t, key, 3) // the operator still manages the cluster as root

	setAuth(false)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionFalse)
	support.Eventually(t, 30*time.Second, "alice to write again with auth off", func() error { return put(aliceCli) })
}

// issueUserCertificates has cert-manager issue, in the test namespace, a
// CA and the server, peer and client certificates a user would provide.
func issueUserCertificates(ctx context.Context, t *testing.T, ns, cluster string) {
	t.Helper()
	ref := func(name string) cmmeta.IssuerReference {
		return cmmeta.IssuerReference{Name: name, Kind: "Issuer", Group: "cert-manager.io"}
	}
	headless := fmt.Sprintf("*.%s-headless.%s.svc", cluster, ns)
	objs := []client.Object{
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bootstrap"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-ca"}, Spec: cmapi.CertificateSpec{IsCA: true, CommonName: "user CA", SecretName: "user-ca", IssuerRef: ref("bootstrap")}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-ca"}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "user-ca"}}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-server"}, Spec: cmapi.CertificateSpec{
			CommonName: cluster, SecretName: "user-server", IssuerRef: ref("user-ca"), IPAddresses: []string{"127.0.0.1"},
			DNSNames: []string{headless, headless + ".cluster.local", cluster, cluster + "." + ns, cluster + "." + ns + ".svc", cluster + "." + ns + ".svc.cluster.local", "localhost"},
			Usages:   []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageClientAuth},
		}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-peer"}, Spec: cmapi.CertificateSpec{
			CommonName: cluster, SecretName: "user-peer", IssuerRef: ref("user-ca"), DNSNames: []string{headless},
			Usages: []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageClientAuth},
		}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-client"}, Spec: cmapi.CertificateSpec{
			CommonName: "root", SecretName: "user-client", IssuerRef: ref("user-ca"), Usages: []cmapi.KeyUsage{cmapi.UsageClientAuth},
		}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLSUserProvidedSecrets checks that a cluster with user-provided
// Secrets waits, saying which Secret or key is missing, while they are
// missing or malformed, and comes up with them once cert-manager issued
// them in the test.
func TestTLSUserProvidedSecrets(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
			PeerSecret: "user-peer", PeerTrustedCASecret: "user-ca",
			ServerSecret: "user-server", ServerTrustedCASecret: "user-ca",
			ClientSecret: "user-client", ClientTrustedCASecret: "user-ca",
		}}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)

	// Missing Secrets: reported by name, and nothing is created.
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, "Secret user-server does not exist", "Secret user-ca does not exist")
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "waiting for the certificates")
	assertNoPods(ctx, t, ns, c.Name)

	// A Secret without tls.key: reported with the key, nothing created.
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-server"}, Data: map[string][]byte{"tls.crt": []byte("not yet")}}
	if err := k8sClient.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, "Secret user-server has no tls.key")
	assertNoPods(ctx, t, ns, c.Name)
	if err := k8sClient.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}

	issueUserCertificates(ctx, t, ns, c.Name)
	took := awaitReady(ctx, t, key, 3)
	t.Logf("user-TLS cluster Ready with 3 members in %s", took.Round(time.Second))
	cert, roots := secretPair(ctx, t, ns, "user-client")
	assertTLSAccess(ctx, t, ns, c.Name, roots, cert)
	assertServedChain(ctx, t, ns, c.Name, roots, cert)

	// The operator never writes a user's Secret.
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "user-server"}, s); err != nil {
		t.Fatal(err)
	}
	for _, mf := range s.ManagedFields {
		if mf.Manager == "etcd-operator-pki" || mf.Manager == "manager" {
			t.Errorf("the operator wrote the user's Secret: %v", mf)
		}
	}
}

// assertRenewalWithoutDowntime has cert-manager renew the members' server
// and peer certificates (as `cmctl renew` does) while a writer writes, and
// checks that every member serves the new certificates on both ports
// without a restart and that no acknowledged write is lost.
func assertRenewalWithoutDowntime(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, roots *x509.CertPool, root *tls.Certificate) {
	t.Helper()
	ns := c.Namespace
	peerCert, peerRoots := secretPair(ctx, t, ns, builder.PeerTLSSecretName(c))
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
		t.Fatal(err)
	}
	// serials are the serials every member serves on its client and
	// peer ports.
	serials := func() (map[string]string, error) {
		out := map[string]string{}
		for i := range pods.Items {
			p := &pods.Items[i]
			for port, pair := range map[string]struct {
				roots *x509.CertPool
				cert  *tls.Certificate
			}{"2379": {roots, root}, "2380": {peerRoots, peerCert}} {
				leaf, err := servedLeaf(c, p, port, pair.roots, pair.cert)
				if err != nil {
					return nil, err
				}
				out[p.Name+":"+port] = leaf.SerialNumber.String()
			}
		}
		return out, nil
	}
	before, err := serials()
	if err != nil {
		t.Fatal(err)
	}
	restarts := map[string]int32{}
	for _, p := range pods.Items {
		restarts[p.Name] = p.Status.ContainerStatuses[0].RestartCount
	}
	finish := support.StartWriter(ctx, t, tlsClient(ctx, t, ns, c.Name, roots, root))
	start := time.Now()
	renew(ctx, t, ns, builder.ServerTLSSecretName(c), builder.PeerTLSSecretName(c))
	support.Eventually(t, 3*time.Minute, "every member to serve renewed certificates", func() error {
		now, err := serials()
		if err != nil {
			return err
		}
		for where, serial := range now {
			if serial == before[where] {
				return fmt.Errorf("%s still serves serial %s", where, serial)
			}
		}
		return nil
	})
	t.Logf("every member served the renewed server and peer certificates %s after the renewal was triggered", time.Since(start).Round(time.Second))
	finish()
	for i := range pods.Items {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods.Items[i]), p); err != nil {
			t.Fatal(err)
		}
		if p.UID != pods.Items[i].UID || p.Status.ContainerStatuses[0].RestartCount != restarts[p.Name] {
			t.Errorf("member %s was restarted or replaced for the renewal", p.Name)
		}
	}
	assertMembers(ctx, t, tlsClient(ctx, t, ns, c.Name, roots, root), ns, 3)
}

// renew has cert-manager renew Certificates at once, as `cmctl renew`
// does: by setting their Issuing condition.
func renew(ctx context.Context, t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		cert := &cmapi.Certificate{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cert); err != nil {
			t.Fatal(err)
		}
		cert.Status.Conditions = append(cert.Status.Conditions, cmapi.CertificateCondition{
			Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
			Message: "renewal triggered by the e2e suite", LastTransitionTime: ptr.To(metav1.Now()), ObservedGeneration: cert.Generation,
		})
		if err := k8sClient.Status().Update(ctx, cert); err != nil {
			t.Fatalf("triggering the renewal of %s: %v", name, err)
		}
	}
}

// servedLeaf is the certificate member Pod pod of cluster c serves on
// port, verified against roots, presenting cert.
func servedLeaf(c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, port string, roots *x509.CertPool, cert *tls.Certificate) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(pod.Status.PodIP, port),
		&tls.Config{RootCAs: roots, ServerName: pod.Name + "." + c.Name + "-headless." + c.Namespace + ".svc", Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("%s:%s: %w", pod.Name, port, err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// sharedClusterIssuer creates a CA ClusterIssuer, as docs/tls.md suggests
// for several clusters, from a root made here (its Secret in cert-manager's
// cluster resource namespace), and removes both when the test ends.
func sharedClusterIssuer(ctx context.Context, t *testing.T, name string) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " shared root"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(der)
	kder, _ := x509.MarshalECPrivateKey(key)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cert-manager", Name: name}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}}
	issuer := &cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: name}}}}
	for _, o := range []client.Object{secret, issuer} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	return root
}

// peerRefusal is how member's peer port (of cluster name in ns) ends a
// mutual TLS connection from a peer presenting cert, verifying the member
// with roots, or "accepted".
func peerRefusal(ctx context.Context, t *testing.T, ns, name, member string, roots *x509.CertPool, cert *tls.Certificate) string {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, pod); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: member + "." + name + "-headless." + ns + ".svc", Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(pod.Status.PodIP, "2380"), cfg)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = conn.Close() }()
	// With TLS 1.3 the member's verdict on the client certificate arrives
	// on the first read; an accepted peer gets nothing until it asks.
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return err.Error()
	}
	return "accepted"
}

// TestTLSSharedIssuer is issue 15, item 3, as it was reproduced: two
// teams, each with a cluster named shared, enableAuth, and issuerRef to
// one CA ClusterIssuer. Each cluster's certificates come from a CA of its
// own that the shared issuer signs, and its members trust only that CA:
// team-b's root client certificate is refused by team-a's members at the
// TLS handshake (it wrote a key before), team-b's peer certificate is
// refused on team-a's peer port, and so is a certificate from team-a's own
// peer CA that names team-b's members (the members' name check, which
// also guards clusters whose user Secrets share a CA). Each team's own
// certificates keep working.
func TestTLSSharedIssuer(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	nsA, nsB := newNamespace(ctx, t), newNamespace(ctx, t)
	issuer := "shared-" + nsA
	root := sharedClusterIssuer(ctx, t, issuer)
	ref := &etcdv1alpha1.IssuerReference{Name: issuer, Kind: "ClusterIssuer"}
	clusters := map[string]*etcdv1alpha1.EtcdCluster{}
	for _, ns := range []string{nsA, nsB} {
		c := &etcdv1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Security: &etcdv1alpha1.SecuritySpec{
				EnableAuth: true,
				TLS:        &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{IssuerRef: ref, PeerIssuerRef: ref}},
			}},
		}
		if err := k8sClient.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		clusters[ns] = c
	}
	for ns, c := range clusters {
		key := client.ObjectKeyFromObject(c)
		took := awaitReady(ctx, t, key, 1)
		awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionTrue)
		t.Logf("%s/%s Ready with auth in %s", ns, c.Name, took.Round(time.Second))
	}
	a := clusters[nsA]

	// team-a's trust bundle holds team-a's own CAs, each signed by the
	// shared root, and not the root.
	bundle := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: nsA, Name: builder.TrustBundleSecretName(a)}, bundle); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{builder.BundleServerCAKey, builder.BundleClientCAKey, builder.BundlePeerCAKey} {
		certs, err := parseAll(bundle.Data[k])
		if err != nil || len(certs) != 1 {
			t.Fatalf("%s of team-a's bundle: %d certificates (%v), want team-a's own CA", k, len(certs), err)
		}
		if certs[0].Equal(root) || certs[0].CheckSignatureFrom(root) != nil || !strings.HasPrefix(certs[0].Subject.CommonName, "shared."+nsA+" etcd ") {
			t.Errorf("%s of team-a's bundle holds %q, issued by %q; want team-a's own CA, an intermediate of the shared root", k, certs[0].Subject.CommonName, certs[0].Issuer.CommonName)
		}
	}
	rootsA := poolOf(t, bundle.Data[builder.BundleServerCAKey])
	peerRootsA := poolOf(t, bundle.Data[builder.BundlePeerCAKey])

	// Clients: each team's root certificate writes to its own cluster;
	// team-b's is refused by team-a's members.
	for ns, c := range clusters {
		cert, roots := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
		cli := tlsClient(ctx, t, ns, c.Name, roots, cert)
		support.Eventually(t, time.Minute, "a write with "+ns+"'s own root certificate", func() error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := cli.Put(cctx, "/own", ns)
			return err
		})
	}
	rootB, _ := secretPair(ctx, t, nsB, builder.ClientTLSSecretName(clusters[nsB]))
	intruder := tlsClient(ctx, t, nsA, a.Name, rootsA, rootB)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := intruder.Put(cctx, "/intruder", "team-b")
	cancel()
	if err == nil {
		t.Error("team-b's root certificate wrote a key to team-a's cluster")
	}
	ownA := tlsClient(ctx, t, nsA, a.Name, rootsA, mustPair(secretPair(ctx, t, nsA, builder.ClientTLSSecretName(a))))
	cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	resp, getErr := ownA.Get(cctx, "/intruder")
	cancel()
	if getErr != nil || len(resp.Kvs) != 0 {
		t.Errorf("reading /intruder on team-a as team-a's root: %v, %v; want no key", resp, getErr)
	}
	if alert := tlsRefusal(ctx, t, nsA, a.Name, rootsA, rootB); !strings.Contains(alert, "tls:") {
		t.Errorf("team-a's client port ended the handshake with team-b's root certificate with %q, want a TLS alert", alert)
	} else {
		t.Logf("team-b's root certificate on team-a: %v (TLS: %s)", err, alert)
	}

	// Peers: team-a's member takes team-a's peer certificate, and refuses
	// team-b's and one of team-a's own peer CA issued for team-b's members.
	otherNames := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "names-team-b"}, Spec: cmapi.CertificateSpec{
		CommonName: "shared", SecretName: "names-team-b", DNSNames: pki.PeerDNSNames(clusters[nsB]),
		Usages:    []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageClientAuth},
		IssuerRef: cmmeta.IssuerReference{Name: pki.PeerCAName(a), Kind: "Issuer", Group: "cert-manager.io"},
	}}
	if err := k8sClient.Create(ctx, otherNames); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, time.Minute, "cert-manager to issue names-team-b", func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "names-team-b"}, &corev1.Secret{})
	})
	peerA, _ := secretPair(ctx, t, nsA, builder.PeerTLSSecretName(a))
	peerB, _ := secretPair(ctx, t, nsB, builder.PeerTLSSecretName(clusters[nsB]))
	namesB, _ := secretPair(ctx, t, nsA, "names-team-b")
	member := a.Name + "-0"
	if got := peerRefusal(ctx, t, nsA, a.Name, member, peerRootsA, peerA); got != "accepted" {
		t.Errorf("team-a's member refused team-a's own peer certificate: %s", got)
	}
	for what, cert := range map[string]*tls.Certificate{
		"team-b's peer certificate":                              peerB,
		"a certificate of team-a's peer CA for team-b's members": namesB,
		"team-a's root client certificate":                       mustPair(secretPair(ctx, t, nsA, builder.ClientTLSSecretName(a))),
	} {
		got := peerRefusal(ctx, t, nsA, a.Name, member, peerRootsA, cert)
		if !strings.Contains(got, "tls:") {
			t.Errorf("team-a's peer port with %s: %q, want a TLS alert", what, got)
			continue
		}
		t.Logf("team-a's peer port refuses %s: %s", what, got)
	}
	assertMembers(ctx, t, ownA, nsA, 1)
}

// mustPair is the key pair of secretPair.
func mustPair(cert *tls.Certificate, _ *x509.CertPool) *tls.Certificate { return cert }

// parseAll parses every PEM certificate of data.
func parseAll(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
}
