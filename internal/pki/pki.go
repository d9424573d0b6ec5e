// Package pki builds the cert-manager objects of a cluster whose
// certificates the operator manages, and checks the certificate Secrets a
// cluster uses. Everything here is pure: no client, no I/O.
package pki

import (
	"fmt"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// RootCommonName is the common name of the operator's client
// certificate: etcd maps it to the root user when auth is on.
const RootCommonName = "root"

// Lifetimes of the certificates the operator asks for. Leaves are renewed
// by cert-manager a third of their lifetime before they expire and picked
// up by etcd without a restart; a renewed CA is rolled out to every member
// through the trust bundle before it signs anything (trust.go).
var (
	caDuration   = metav1.Duration{Duration: 10 * 365 * 24 * time.Hour}
	leafDuration = metav1.Duration{Duration: 90 * 24 * time.Hour}
	leafRenewal  = metav1.Duration{Duration: 30 * 24 * time.Hour}
)

// Every cluster has CAs of its own, one for client traffic and one for
// peer traffic, and every certificate the operator issues for it is
// signed by one of them; its members trust those CAs and nothing else
// (trust.go). Without issuerRef or peerIssuerRef a self-signed Issuer
// signs a CA; with them the user's issuer does, and the CA is an
// intermediate of the user's. Either way a certificate of another cluster,
// even one from the same issuer, is no identity of this one: trust is per
// cluster. (An operator before this one had the user's issuer sign the
// leaves directly and let members trust the issuer's CA, so that one
// cluster's root certificate was root on every cluster of that issuer.)

// SelfSignedIssuerName is the Issuer that signs the cluster's CAs that
// no issuer of the user's signs.
func SelfSignedIssuerName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-selfsigned" }

// ClientCAName names the Certificate, Secret and Issuer of the CA that
// signs the cluster's server and client certificates.
func ClientCAName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-ca" }

// PeerCAName names the Certificate, Secret and Issuer of the CA that signs
// the cluster's peer certificates.
func PeerCAName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-peer-ca" }

// OwnCAs are the cluster's own CAs: the client CA and the peer CA.
func OwnCAs(c *etcdv1alpha1.EtcdCluster) []string {
	return []string{ClientCAName(c), PeerCAName(c)}
}

// UserIssuer is the user's issuer that signs the cluster's CA ca
// (issuerRef for the client CA, peerIssuerRef for the peer CA), nil when
// the CA is self-signed.
func UserIssuer(c *etcdv1alpha1.EtcdCluster, ca string) *cmmeta.IssuerReference {
	cm := c.Spec.Security.TLS.CertManager
	ref := cm.IssuerRef
	if ca == PeerCAName(c) {
		ref = cm.PeerIssuerRef
	}
	if ref == nil {
		return nil
	}
	r := cmmeta.IssuerReference{Name: ref.Name, Kind: ref.Kind, Group: ref.Group}
	if r.Kind == "" {
		r.Kind = cmapi.IssuerKind
	}
	if r.Group == "" {
		r.Group = "cert-manager.io"
	}
	return &r
}

// caIssuer is the issuer of the cluster's CA ca: the user's, or the
// self-signed Issuer.
func caIssuer(c *etcdv1alpha1.EtcdCluster, ca string) cmmeta.IssuerReference {
	if ref := UserIssuer(c, ca); ref != nil {
		return *ref
	}
	return ownIssuer(SelfSignedIssuerName(c))
}

// ownIssuer refers to an Issuer of the operator's, in the cluster's
// namespace.
func ownIssuer(name string) cmmeta.IssuerReference {
	return cmmeta.IssuerReference{Name: name, Kind: cmapi.IssuerKind, Group: "cert-manager.io"}
}

// Issuers are the Issuers of a cluster in operator-managed mode: a CA
// Issuer per CA of the cluster, and the self-signed Issuer unless the
// user's issuers sign both CAs.
func Issuers(c *etcdv1alpha1.EtcdCluster) []*cmapi.Issuer {
	var issuers []*cmapi.Issuer
	for _, ca := range OwnCAs(c) {
		if UserIssuer(c, ca) == nil {
			issuers = append(issuers, &cmapi.Issuer{
				ObjectMeta: builder.ObjectMeta(c, SelfSignedIssuerName(c), etcdv1alpha1.EmbeddedObjectMetadata{}),
				Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
			})
			break
		}
	}
	for _, ca := range OwnCAs(c) {
		issuers = append(issuers, &cmapi.Issuer{
			ObjectMeta: builder.ObjectMeta(c, ca, etcdv1alpha1.EmbeddedObjectMetadata{}),
			Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: SigningSecretName(ca)}}},
		})
	}
	return issuers
}

// Certificates are the Certificates of a cluster in operator-managed mode:
// the cluster's CAs, then the members' server and peer certificates and
// the operator's own client certificate (CN root), which the cluster's CAs
// sign.
func Certificates(c *etcdv1alpha1.EtcdCluster) []*cmapi.Certificate {
	var certs []*cmapi.Certificate
	for _, ca := range OwnCAs(c) {
		certs = append(certs, &cmapi.Certificate{
			ObjectMeta: builder.ObjectMeta(c, ca, etcdv1alpha1.EmbeddedObjectMetadata{}),
			Spec: cmapi.CertificateSpec{
				IsCA:           true,
				CommonName:     caCommonName(c, caRole(c, ca)),
				SecretName:     ca,
				Duration:       &caDuration,
				PrivateKey:     privateKey(),
				IssuerRef:      caIssuer(c, ca),
				SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: builder.ClusterLabels(c)},
			},
		})
	}
	leaf := func(name, cn string, dns []string, ips []string, issuer cmmeta.IssuerReference, usages ...cmapi.KeyUsage) *cmapi.Certificate {
		return &cmapi.Certificate{
			ObjectMeta: builder.ObjectMeta(c, name, etcdv1alpha1.EmbeddedObjectMetadata{}),
			Spec: cmapi.CertificateSpec{
				CommonName:     cn,
				DNSNames:       dns,
				IPAddresses:    ips,
				SecretName:     name,
				Duration:       &leafDuration,
				RenewBefore:    &leafRenewal,
				PrivateKey:     privateKey(),
				Usages:         append([]cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment}, usages...),
				IssuerRef:      issuer,
				SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: builder.ClusterLabels(c)},
			},
		}
	}
	return append(certs,
		// The server certificate is a client certificate too: etcd's
		// gRPC gateway dials its own member with it.
		leaf(builder.ServerTLSSecretName(c), c.Name, ServerDNSNames(c), []string{"127.0.0.1", "::1"}, ownIssuer(ClientCAName(c)), cmapi.UsageServerAuth, cmapi.UsageClientAuth),
		leaf(builder.PeerTLSSecretName(c), c.Name, PeerDNSNames(c), nil, ownIssuer(PeerCAName(c)), cmapi.UsageServerAuth, cmapi.UsageClientAuth),
		leaf(builder.ClientTLSSecretName(c), RootCommonName, nil, nil, ownIssuer(ClientCAName(c)), cmapi.UsageClientAuth),
	)
}

// maxCommonName is the longest common name X.509 allows (ub-common-name);
// cert-manager refuses a Certificate with a longer one.
const maxCommonName = 64

// caCommonName is the common name of one of the cluster's CAs,
// "<cluster>.<namespace> etcd <role>", its "<cluster>.<namespace>" cut to
// fit maxCommonName: the schema limits the cluster's name but cannot see
// its namespace (up to 63 characters). Names that fit are never changed,
// so no CA is reissued for it. The common name only tells people which
// CA they look at; nothing trusts a CA by its name.
func caCommonName(c *etcdv1alpha1.EtcdCluster, role string) string {
	suffix := " etcd " + role
	id := c.Name + "." + c.Namespace
	if limit := maxCommonName - len(suffix); len(id) > limit {
		id = strings.TrimRight(id[:limit], ".-")
	}
	return id + suffix
}

// caRole is how a CA's common name says what it signs.
func caRole(c *etcdv1alpha1.EtcdCluster, ca string) string {
	if ca == PeerCAName(c) {
		return "peer CA"
	}
	return "client CA"
}

// privateKey is the key every certificate gets: ECDSA P-256, replaced at
// every renewal.
func privateKey() *cmapi.CertificatePrivateKey {
	return &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways}
}

// PeerDNSNames are the names members reach each other by: every member
// under the headless Service, short and with the cluster domain.
func PeerDNSNames(c *etcdv1alpha1.EtcdCluster) []string {
	headless := fmt.Sprintf("%s.%s.svc", builder.HeadlessServiceName(c), c.Namespace)
	return []string{"*." + headless, "*." + headless + ".cluster.local"}
}

// ServerDNSNames are the names clients reach members by: every member, the
// client Service in short, namespaced and fully qualified forms, and
// localhost.
func ServerDNSNames(c *etcdv1alpha1.EtcdCluster) []string {
	svc := builder.ClientServiceName(c)
	return append(PeerDNSNames(c),
		svc, svc+"."+c.Namespace, svc+"."+c.Namespace+".svc", svc+"."+c.Namespace+".svc.cluster.local",
		"localhost")
}

// TenantCertificate is the client certificate of tenant t of cluster c:
// its CN is the tenant's etcd user, the cluster's client CA signs it, and
// it goes into the Secret t.ClientCertificateName(); the tenant owns it.
func TenantCertificate(c *etcdv1alpha1.EtcdCluster, t *etcdv1alpha1.EtcdTenant) *cmapi.Certificate {
	labels := builder.ClusterLabels(c)
	labels[etcdv1alpha1.LabelTenant] = t.Name
	return &cmapi.Certificate{
		ObjectMeta: metav1.ObjectMeta{
			Name:            t.ClientCertificateName(),
			Namespace:       t.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(t, etcdv1alpha1.GroupVersion.WithKind("EtcdTenant"))},
		},
		Spec: cmapi.CertificateSpec{
			CommonName:     t.UserName(),
			SecretName:     t.ClientCertificateName(),
			Duration:       &leafDuration,
			RenewBefore:    &leafRenewal,
			PrivateKey:     privateKey(),
			Usages:         []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment, cmapi.UsageClientAuth},
			IssuerRef:      ownIssuer(ClientCAName(c)),
			SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: labels},
		},
	}
}
