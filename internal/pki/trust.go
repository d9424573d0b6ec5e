package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// A CA change reaches a cluster in three steps, so that no member ever
// meets a certificate it does not trust:
//
//  1. the trust bundle (builder.TrustBundleSecretName) gathers every CA in
//     use, the new one as soon as it exists, and keeps replaced CAs until
//     they expire;
//  2. the topology reconciler rolls every member Pod started with another
//     bundle, one at a time (etcd reads the CAs it trusts only at start);
//  3. only then does the operator's CA Issuer sign with the new CA: it
//     signs from a copy of the CA's Secret (SigningSecretName), which is
//     refreshed once every member Pod trusts the new CA.
//
// Leaves are renewed by the new CA on their own schedule, or at once when
// asked (cmctl renew); clients holding the bundle trust old and new.

// SigningSecretName is the Secret the operator's CA Issuer ca signs with:
// a copy of the CA's own Secret, refreshed only once every member trusts
// the CA it holds.
func SigningSecretName(ca string) string { return ca + "-signing" }

// TrustSources are, per key of the trust bundle, the certificates it
// gathers: the CA of each certificate in use (ca.crt of its Secret) and,
// for the CAs the operator creates, the CA itself (tls.crt of the CA
// Secret), which is renewed before any leaf it signs.
func TrustSources(c *etcdv1alpha1.EtcdCluster) map[string][]builder.SecretKey {
	s := builder.CertificateSourcesOf(c)
	sources := map[string][]builder.SecretKey{}
	add := func(key string, k builder.SecretKey) {
		if k.IsSet() {
			sources[key] = append(sources[key], k)
		}
	}
	add(builder.BundleServerCAKey, s.ServerCA)
	add(builder.BundleClientCAKey, s.ClientCA)
	add(builder.BundlePeerCAKey, s.PeerCA)
	if c.Spec.Security.ManagedTLS() {
		for _, ca := range OwnCAs(c) {
			k := builder.SecretKey{Secret: ca, Key: builder.CertKey}
			for _, key := range trustKeysOf(c, ca) {
				add(key, k)
			}
		}
	}
	return sources
}

// trustKeysOf are the keys of the trust bundle that must hold the
// operator's CA ca before it signs: the peer CA signs peers, the client CA
// signs servers and clients.
func trustKeysOf(c *etcdv1alpha1.EtcdCluster, ca string) []string {
	if ca == PeerCAName(c) {
		return []string{builder.BundlePeerCAKey}
	}
	return []string{builder.BundleServerCAKey, builder.BundleClientCAKey}
}

// Trust is the content of a trust bundle: for each key, the certificates
// of its sources and those of the previous bundle, once each, without
// expired ones, oldest first. read returns a source's PEM, nil when its
// Secret or key does not exist yet (it adds nothing then). A source that
// holds something else than certificates is a *SecretError; the previous
// bundle's unreadable blocks are dropped.
func Trust(sources map[string][]builder.SecretKey, read func(builder.SecretKey) []byte, previous map[string][]byte, now time.Time) (map[string][]byte, error) {
	data := map[string][]byte{}
	for key, keySources := range sources {
		var certs []*x509.Certificate
		for _, src := range keySources {
			pemData := read(src)
			if len(pemData) == 0 {
				continue
			}
			parsed, err := parseCerts(pemData)
			if err != nil {
				return nil, &SecretError{Secret: src.Secret, Key: src.Key, Err: err}
			}
			certs = append(certs, parsed...)
		}
		certs = append(certs, parseValid(previous[key])...)
		certs = slices.DeleteFunc(certs, func(c *x509.Certificate) bool { return !c.NotAfter.After(now) })
		slices.SortFunc(certs, func(a, b *x509.Certificate) int {
			if n := a.NotBefore.Compare(b.NotBefore); n != 0 {
				return n
			}
			return bytes.Compare(a.Raw, b.Raw)
		})
		certs = slices.CompactFunc(certs, func(a, b *x509.Certificate) bool { return bytes.Equal(a.Raw, b.Raw) })
		if len(certs) == 0 {
			continue
		}
		var out bytes.Buffer
		for _, c := range certs {
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
		data[key] = out.Bytes()
	}
	return data, nil
}

// SecretError is a key of a certificate Secret that does not hold what
// it should.
type SecretError struct {
	Secret, Key string
	Err         error
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("Secret %s: %s: %v", e.Secret, e.Key, e.Err)
}

func (e *SecretError) Unwrap() error { return e.Err }

// parseValid parses the certificates of data, skipping what does not parse.
func parseValid(data []byte) []*x509.Certificate {
	certs, _ := certsOf(data)
	return certs
}

// Trusts tells whether every certificate of caPEM (a CA Secret's tls.crt)
// is in the bundle under each key the operator's CA ca must be trusted in.
func Trusts(c *etcdv1alpha1.EtcdCluster, bundle map[string][]byte, ca string, caPEM []byte) bool {
	want := parseValid(caPEM)
	if len(want) == 0 {
		return false
	}
	for _, key := range trustKeysOf(c, ca) {
		have := parseValid(bundle[key])
		for _, w := range want {
			if !slices.ContainsFunc(have, func(h *x509.Certificate) bool { return h.Equal(w) }) {
				return false
			}
		}
	}
	return true
}

// TrustBundleSecret is the trust bundle Secret of cluster c holding data.
func TrustBundleSecret(c *etcdv1alpha1.EtcdCluster, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: builder.ObjectMeta(c, builder.TrustBundleSecretName(c), etcdv1alpha1.EmbeddedObjectMetadata{}),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// SigningSecret is the copy of the operator's CA Secret ca that its CA
// Issuer signs with.
func SigningSecret(c *etcdv1alpha1.EtcdCluster, ca *corev1.Secret) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: builder.ObjectMeta(c, SigningSecretName(ca.Name), etcdv1alpha1.EmbeddedObjectMetadata{}),
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			builder.CertKey:       ca.Data[builder.CertKey],
			builder.PrivateKeyKey: ca.Data[builder.PrivateKeyKey],
			builder.CAKey:         ca.Data[builder.CAKey],
		},
	}
}

// DescribeTrust says how many CAs of each kind a trust bundle holds.
func DescribeTrust(data map[string][]byte) string {
	var parts []string
	for _, k := range []struct{ key, what string }{
		{builder.BundleServerCAKey, "server"}, {builder.BundleClientCAKey, "client"}, {builder.BundlePeerCAKey, "peer"},
	} {
		if n := len(parseValid(data[k.key])); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s CA%s", n, k.what, plural(n)))
		}
	}
	if len(parts) == 0 {
		return "no CA yet"
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// SecretsOf names every Secret the PKI of cluster c reads or writes: the
// certificate Secrets, the operator's CAs and their signing copies, and
// the trust bundle.
func SecretsOf(c *etcdv1alpha1.EtcdCluster) []string {
	names := []string{builder.TrustBundleSecretName(c)}
	for _, n := range Needs(builder.CertificateSourcesOf(c)) {
		names = append(names, n.Secret)
	}
	if c.Spec.Security.ManagedTLS() {
		for _, ca := range OwnCAs(c) {
			names = append(names, ca, SigningSecretName(ca))
		}
	}
	return names
}

// TrustCondition is the CATrusted condition: True when all member Pods
// were started with the current bundle, else how many were, and which of
// the operator's CAs keep signing with their old keys meanwhile (held).
func TrustCondition(c *etcdv1alpha1.EtcdCluster, bundle map[string][]byte, trusting, all int, held []string) metav1.Condition {
	name := builder.TrustBundleSecretName(c)
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionCATrusted, ObservedGeneration: c.Generation, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonAllMembersTrust,
		Message: fmt.Sprintf("All %d member Pods were started trusting the CAs of Secret %s (%s)", all, name, DescribeTrust(bundle))}
	if trusting < all {
		cond.Status, cond.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonRollingOut
		cond.Message = fmt.Sprintf("%d of %d member Pods were started trusting the CAs of Secret %s (%s); the others are restarted one at a time (the Progressing condition says what the roll waits for)", trusting, all, name, DescribeTrust(bundle))
		if len(held) > 0 {
			cond.Message += "; the old keys of " + strings.Join(held, " and ") + " sign until every member trusts the new ones"
		}
	}
	return cond
}

// TrustUnknown is the CATrusted condition of a pass that could not gather
// the trust bundle, and why.
func TrustUnknown(c *etcdv1alpha1.EtcdCluster, why string) metav1.Condition {
	return metav1.Condition{Type: etcdv1alpha1.ConditionCATrusted, ObservedGeneration: c.Generation, Status: metav1.ConditionUnknown, Reason: etcdv1alpha1.ReasonTrustUnknown,
		Message: "The trust bundle " + builder.TrustBundleSecretName(c) + " cannot be gathered: " + why}
}
