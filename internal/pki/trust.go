package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
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
//  3. only then does the cluster's CA Issuer sign with the new CA: it
//     signs from a copy of the CA's Secret (SigningSecretName), which is
//     refreshed once every member Pod trusts the new CA.
//
// Leaves are renewed by the new CA on their own schedule, or at once when
// asked (cmctl renew); clients holding the bundle trust old and new.
//
// In operator-managed mode the bundle holds the cluster's own CAs (pki.go)
// and nothing else: not the CA of the user's issuer that signs them, since
// Go's TLS, etcd's among them, takes any certificate of the trusted pool
// as an anchor, and the issuer's CA would let in every certificate the
// issuer signs for other clusters. Bundles gathered by an operator before
// per-cluster CAs hold the user's issuer's CA (legacy CAs); see
// ownTrust.

// SigningSecretName is the Secret the cluster's CA Issuer ca signs with:
// a copy of the CA's own Secret, refreshed only once every member trusts
// the CA it holds.
func SigningSecretName(ca string) string { return ca + "-signing" }

// TrustSources are, per key of the trust bundle, the certificates it
// gathers: in operator-managed mode the cluster's own CAs (tls.crt of the
// CA Secrets: the CA is renewed before any leaf it signs), with the user's
// Secrets their CA Secrets (ca.crt).
func TrustSources(c *etcdv1alpha1.EtcdCluster) map[string][]builder.SecretKey {
	sources := map[string][]builder.SecretKey{}
	add := func(key string, k builder.SecretKey) {
		if k.IsSet() {
			sources[key] = append(sources[key], k)
		}
	}
	if c.Spec.Security.ManagedTLS() {
		for _, ca := range OwnCAs(c) {
			for _, key := range trustKeysOf(c, ca) {
				add(key, builder.SecretKey{Secret: ca, Key: builder.CertKey})
			}
		}
		return sources
	}
	s := builder.CertificateSourcesOf(c)
	add(builder.BundleServerCAKey, s.ServerCA)
	add(builder.BundleClientCAKey, s.ClientCA)
	add(builder.BundlePeerCAKey, s.PeerCA)
	return sources
}

// trustKeysOf are the keys of the trust bundle that must hold the
// cluster's CA ca before it signs: the peer CA signs peers, the client CA
// signs servers and clients.
func trustKeysOf(c *etcdv1alpha1.EtcdCluster, ca string) []string {
	if ca == PeerCAName(c) {
		return []string{builder.BundlePeerCAKey}
	}
	return []string{builder.BundleServerCAKey, builder.BundleClientCAKey}
}

// Trust is the content of a trust bundle: for each key, the certificates
// of its sources and those of the previous bundle, once each, without
// expired ones, oldest first. A ca.crt source gives all its certificates
// (a user's may hold old and new CA); a tls.crt source, a CA Secret, only
// the first, the CA itself: what follows is the chain of the issuer that
// signed it. read returns a source's PEM, nil when its Secret or key does
// not exist yet (it adds nothing then). A source that holds something
// else than certificates is a *SecretError; the previous bundle's
// unreadable blocks are dropped.
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
			if src.Key == builder.CertKey {
				parsed = parsed[:1]
			}
			certs = append(certs, parsed...)
		}
		certs = append(certs, parseValid(previous[key])...)
		certs = slices.DeleteFunc(certs, func(c *x509.Certificate) bool { return !c.NotAfter.After(now) })
		if len(certs) > 0 {
			data[key] = encode(certs)
		}
	}
	return data, nil
}

// encode is the PEM of certs, once each, oldest first.
func encode(certs []*x509.Certificate) []byte {
	certs = slices.Clone(certs)
	slices.SortFunc(certs, func(a, b *x509.Certificate) int {
		if n := a.NotBefore.Compare(b.NotBefore); n != 0 {
			return n
		}
		return bytes.Compare(a.Raw, b.Raw)
	})
	certs = slices.CompactFunc(certs, func(a, b *x509.Certificate) bool { return bytes.Equal(a.Raw, b.Raw) })
	var out bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
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

// Trusts tells whether the CA of caPEM (a CA Secret's tls.crt: the CA,
// then the chain of its issuer) is in the bundle under each key the
// cluster's CA ca must be trusted in.
func Trusts(c *etcdv1alpha1.EtcdCluster, bundle map[string][]byte, ca string, caPEM []byte) bool {
	want := parseValid(caPEM)
	if len(want) == 0 {
		return false
	}
	for _, key := range trustKeysOf(c, ca) {
		if !slices.ContainsFunc(parseValid(bundle[key]), want[0].Equal) {
			return false
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

// SigningSecret is the copy of the cluster's CA Secret ca that its CA
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
// certificate Secrets, the cluster's CAs and their signing copies
// (operator-managed mode), and the trust bundle. Its tenants' certificate
// Secrets are read too, found by their labels.
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
// the cluster's CAs keep signing with their old keys meanwhile (held).
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

// leafPropagation is how long a certificate Secret cert-manager has just
// renewed may take to reach the files of the Pods that mount it: the
// kubelet refreshes mounted Secrets within its sync period (a minute by
// default) and the lifetime of its cache.
const leafPropagation = 5 * time.Minute

// Leaves are the certificates that present themselves to a cluster's
// members or clients, by the key of the trust bundle they are verified
// with: the server certificate (by clients, and by its own member when
// etcd's gateway dials it), the operator's client certificate and the
// tenants' (by members, as clients), the peer certificate (by members, as
// peers). Each is the leaf of its Secret's tls.crt followed by the
// certificates cert-manager wrote with it: the rest of tls.crt (the chain
// up to a self-signed root) and ca.crt. A Secret not issued yet is left
// out.
func Leaves(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret, tenants []*corev1.Secret) map[string][][]*x509.Certificate {
	s := builder.CertificateSourcesOf(c)
	leaves := map[string][][]*x509.Certificate{}
	add := func(key string, secret *corev1.Secret) {
		if secret == nil {
			return
		}
		if chain := parseValid(secret.Data[builder.CertKey]); len(chain) > 0 {
			leaves[key] = append(leaves[key], append(chain, parseValid(secret.Data[builder.CAKey])...))
		}
	}
	add(builder.BundleServerCAKey, secrets[s.ServerCert.Secret])
	add(builder.BundleClientCAKey, secrets[s.ServerCert.Secret])
	add(builder.BundleClientCAKey, secrets[s.ClientCert.Secret])
	for _, t := range tenants {
		add(builder.BundleClientCAKey, t)
	}
	add(builder.BundlePeerCAKey, secrets[s.PeerCert.Secret])
	return leaves
}

// ownTrust makes an operator-managed cluster's trust bundle, gathered by
// Trust from the cluster's CAs (cas: the certificates in its CA Secrets,
// by CA name) and the previous bundle, hold the CAs of the cluster's own
// and nothing else, without cutting off a leaf in use. A CA of the
// cluster's own is one with the subject of the CA now in its Secret of
// that key: renewals keep the subject.
//
//   - The CA of the cluster's own that signed each leaf is added (until
//     it expires): a leaf renewed before its CA was replaced stays
//     trusted even when the bundle is gathered anew.
//   - Legacy CAs, the others, are what a bundle gathered by an operator
//     before per-cluster CAs holds for a user's issuer: its CA, which
//     signed the leaves directly. They stay while a leaf is not signed by
//     a CA of the cluster's own, and until the renewed leaves had time to
//     reach the Pods that present them (leafPropagation); then they go,
//     and the members are rolled once more, trusting the cluster's own
//     CAs only.
//
// A key without a CA of the cluster's own yet is left as it is. It
// returns the bundle and when to look again while legacy CAs wait only
// for leaves to propagate (zero otherwise).
func ownTrust(c *etcdv1alpha1.EtcdCluster, bundle map[string][]byte, cas map[string]*x509.Certificate, leaves map[string][][]*x509.Certificate, now time.Time) (map[string][]byte, time.Time) {
	var recheck time.Time
	out := maps.Clone(bundle)
	for _, key := range []string{builder.BundleServerCAKey, builder.BundleClientCAKey, builder.BundlePeerCAKey} {
		var subjects [][]byte
		for _, ca := range OwnCAs(c) {
			if cert := cas[ca]; cert != nil && slices.Contains(trustKeysOf(c, ca), key) {
				subjects = append(subjects, cert.RawSubject)
			}
		}
		if len(subjects) == 0 {
			continue
		}
		isOwn := func(cert *x509.Certificate) bool {
			return slices.ContainsFunc(subjects, func(s []byte) bool { return bytes.Equal(s, cert.RawSubject) })
		}
		var own, legacy []*x509.Certificate
		for _, cert := range parseValid(bundle[key]) {
			if isOwn(cert) {
				own = append(own, cert)
			} else {
				legacy = append(legacy, cert)
			}
		}
		// The signers of the leaves, and whether a CA of the cluster's own
		// signed each.
		signed := true
		var newest time.Time
		for _, chain := range leaves[key] {
			leaf := chain[0]
			i := slices.IndexFunc(chain[1:], func(ca *x509.Certificate) bool { return isOwn(ca) && leaf.CheckSignatureFrom(ca) == nil })
			if i >= 0 && chain[1+i].NotAfter.After(now) {
				own = append(own, chain[1+i])
			}
			signed = signed && i >= 0
			if leaf.NotBefore.After(newest) {
				newest = leaf.NotBefore
			}
		}
		kept := own
		switch settled := newest.Add(leafPropagation); {
		case len(legacy) == 0:
		case !signed:
			kept = append(kept, legacy...)
		case now.Before(settled):
			kept = append(kept, legacy...)
			if recheck.IsZero() || settled.Before(recheck) {
				recheck = settled
			}
		}
		if len(kept) > 0 {
			out[key] = encode(kept)
		}
	}
	return out, recheck
}

// NotCA says why a certificate cannot sign others: "" when it can. An
// issuer may ignore a Certificate's isCA (cert-manager passes it on as a
// request), and Go's TLS would still take such a certificate as an anchor
// of the trust bundle.
func NotCA(cert *x509.Certificate) string {
	switch {
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return "it is not a CA certificate (no basic constraint CA:TRUE)"
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return "its key usage does not allow signing certificates"
	}
	return ""
}
