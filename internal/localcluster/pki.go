package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the control plane's key material, written once per local cluster
// under <state>/pki.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// generate writes a cluster CA, the kube-apiserver serving certificate (for
// the given IPs and the kubernetes Service names), the node agents' kubelet
// serving certificate (for the first IP) and kube-apiserver's client
// certificate for them (from a CA of its own), an admin client certificate (group system:masters)
// and the ServiceAccount signing key.
func (p pki) generate(apiserverIPs []net.IP, domain string) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caKey, caCert, err := newCA("etcd-operator-localcluster-ca")
	if err != nil {
		return err
	}
	if err := writeCertAndKey(p.path("ca"), caCert, caKey); err != nil {
		return err
	}
	dnsNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + domain}
	ips := append([]net.IP{net.ParseIP("127.0.0.1")}, apiserverIPs...)
	if err := p.issue("apiserver", caCert, caKey, pkix.Name{CommonName: "kube-apiserver"}, dnsNames, ips, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	// The node agents serve the kubelet API on the gateway; kube-apiserver
	// verifies them and they accept only its client certificate.
	if err := p.issue("kubelet", caCert, caKey, pkix.Name{CommonName: "localcluster-kubelet"}, []string{"localhost"}, apiserverIPs[:1], x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	// Its own CA: the cluster CA also signs what kube-controller-manager
	// approves, and no approved request may stand in for kube-apiserver.
	kcKey, kcCert, err := newCA("etcd-operator-localcluster-kubelet-client-ca")
	if err != nil {
		return err
	}
	if err := writeCertAndKey(p.path("kubelet-client-ca"), kcCert, kcKey); err != nil {
		return err
	}
	if err := p.issue("apiserver-kubelet-client", kcCert, kcKey, pkix.Name{CommonName: kubeletClientCN}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}
	if err := p.issue("admin", caCert, caKey, pkix.Name{CommonName: "localcluster-admin", Organization: []string{"system:masters"}}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(p.path("sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

func (p pki) issue(name string, caCert *x509.Certificate, caKey crypto.Signer, subject pkix.Name, dnsNames []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("issuing %s certificate: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	return writeCertAndKey(p.path(name), cert, key)
}

func newCA(cn string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeCertAndKey(base string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		return err
	}
	return writeKey(base+".key", key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
