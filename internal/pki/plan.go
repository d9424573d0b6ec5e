package pki

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// Waits of a pass. Certificates and Secrets are watched; these only bound
// how stale the conditions can get.
const (
	// CertManagerMissingRecheck is how soon to look again while the
	// cert-manager API is not served.
	CertManagerMissingRecheck = time.Minute
	// CertificatesRecheck is the longest wait between two checks of valid
	// certificates.
	CertificatesRecheck = time.Hour
	// ForeignSecretRecheck is how often the operator looks again while a
	// Secret of a Certificate's name belongs to someone else: that Secret
	// is not in the operator's cache (it carries none of its labels), so
	// its deletion wakes nothing.
	ForeignSecretRecheck = 10 * time.Second
)

// Observed is what a pass of the PKI reconciler reads of a cluster with
// TLS.
type Observed struct {
	Cluster *etcdv1alpha1.EtcdCluster
	// CertManager tells whether the cert-manager API is served.
	CertManager bool
	// Secrets are the Secrets of SecretsOf(Cluster) that exist, by name.
	Secrets map[string]*corev1.Secret
	// Certificates are the Certificates of Certificates(Cluster) that
	// exist, by name (operator-managed mode only).
	Certificates map[string]*cmapi.Certificate
	// TenantSecrets are the certificate Secrets of the cluster's tenants
	// that exist (operator-managed mode only).
	TenantSecrets []*corev1.Secret
	// OtherClusters are the other EtcdClusters the operator sees, with the
	// client CAs they trust (user-provided Secrets with a client CA only).
	OtherClusters []OtherCluster
	// MemberTrustHashes are the trust bundle hashes the member Pods were
	// started with (etcdv1alpha1.AnnotationTrustBundleHash), one per Pod.
	MemberTrustHashes []string
	Now               time.Time
}

// Plan is what a pass does: apply Writes in order, then raise Events and
// set the two conditions; look again after Recheck (0: the watches will
// tell).
type Plan struct {
	Writes            []Write
	Events            []Event
	CertificatesReady metav1.Condition
	CATrusted         metav1.Condition
	Recheck           time.Duration
}

// Write is an object to server-side apply and the event to raise once it
// is applied (nil for none).
type Write struct {
	Object client.Object
	Event  *Event
}

// Event is an event on the cluster.
type Event struct {
	Type, Reason, Message string
}

// PlanCertificates decides a pass of the PKI reconciler from what it
// observed, in the order of a CA change (see the top of trust.go): apply
// the cert-manager objects (managed mode); gather the trust bundle; let
// each of the cluster's CAs sign once every member Pod trusts it (the
// trust gate); wait for cert-manager to issue; check the Secrets.
func PlanCertificates(o Observed) Plan {
	c, now := o.Cluster, o.Now
	managed := c.Spec.Security.ManagedTLS()
	var p Plan
	if managed && !o.CertManager {
		why := "The cert-manager API (cert-manager.io/v1) is not installed: install cert-manager, then restart the operator"
		p.CertificatesReady, p.CATrusted = Condition(c, etcdv1alpha1.ReasonCertManagerMissing, []string{why}, time.Time{}, now), TrustUnknown(c, why)
		p.Recheck = CertManagerMissingRecheck
		return p.warnOnChange(c)
	}
	if managed {
		if foreign := ForeignSecrets(c, o.Secrets); len(foreign) > 0 {
			p.CertificatesReady, p.CATrusted = Condition(c, etcdv1alpha1.ReasonForeignObject, foreign, time.Time{}, now), TrustUnknown(c, strings.Join(foreign, "; "))
			p.Recheck = ForeignSecretRecheck
			return p.warnOnChange(c)
		}
		for _, i := range Issuers(c) {
			p.Writes = append(p.Writes, Write{Object: i})
		}
		for _, cert := range Certificates(c) {
			p.Writes = append(p.Writes, Write{Object: cert})
		}
	}

	// The Secrets as this pass leaves them.
	secrets := map[string]*corev1.Secret{}
	maps.Copy(secrets, o.Secrets)
	// The cluster's CAs that may sign (managed mode), and why the others
	// may not.
	var cas map[string]*x509.Certificate
	var refused []string
	if managed {
		cas, refused = signingCAs(c, secrets)
	}
	// A cluster that has not formed and has no member Pod trusts nothing
	// yet: its bundle is gathered from its sources alone, so that a CA
	// replaced before it started (one it was refused for sharing, say) is
	// not kept.
	fresh := c.Status.ClusterID == "" && len(o.MemberTrustHashes) == 0
	bundle, legacyRecheck, err := p.gatherTrust(c, secrets, cas, o.TenantSecrets, fresh, now)
	if err != nil {
		p.CertificatesReady, p.CATrusted = Condition(c, etcdv1alpha1.ReasonSecretInvalid, []string{err.Error()}, time.Time{}, now), TrustUnknown(c, err.Error())
		return p.warnOnChange(c)
	}
	if !legacyRecheck.IsZero() {
		p.Recheck = legacyRecheck.Sub(now) + time.Second
	}
	hash := builder.TrustBundleHash(bundle)
	trusting := 0
	for _, h := range o.MemberTrustHashes {
		if h == hash {
			trusting++
		}
	}
	all := len(o.MemberTrustHashes)
	var held []string
	if managed {
		// What the members run with; nothing for a cluster that trusts
		// nothing yet.
		var previous map[string][]byte
		if prev := o.Secrets[builder.TrustBundleSecretName(c)]; prev != nil && !fresh {
			previous = prev.Data
		}
		held = p.releaseSigning(c, secrets, cas, bundle, previous, trusting == all, now)
	}
	p.CATrusted = TrustCondition(c, bundle, trusting, all, held)

	if why := SharedClientCA(c, bundle[builder.BundleClientCAKey], o.OtherClusters); why != "" {
		// Refused before the cluster forms; a cluster that runs already is
		// left running (refusing its Pods would not take the trust away
		// from the members that hold it) and warned.
		if c.Status.ClusterID == "" {
			p.CertificatesReady = Condition(c, etcdv1alpha1.ReasonSharedClientCA, []string{why}, time.Time{}, now)
			return p.warnOnChange(c)
		}
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, etcdv1alpha1.ReasonSharedClientCA, why})
	}

	if managed {
		refused = append(refused, failedCAs(c, o.Certificates)...)
		if len(refused) > 0 {
			p.CertificatesReady = Condition(c, etcdv1alpha1.ReasonIssuerCannotSignCA, refused, time.Time{}, now)
			return p.warnOnChange(c)
		}
		if issuing := Issuing(c, o.Certificates, held, secrets, now); len(issuing) > 0 {
			p.CertificatesReady = Condition(c, etcdv1alpha1.ReasonIssuing, issuing, time.Time{}, now)
			return p.warnOnChange(c)
		}
	}
	var problems []string
	var nearest time.Time
	for _, n := range Needs(builder.CertificateSourcesOf(c)) {
		expiry, err := Check(n, secrets[n.Secret])
		switch {
		case err != nil:
			problems = append(problems, err.Error())
		case !expiry.After(now):
			problems = append(problems, fmt.Sprintf("Secret %s holds a certificate that expired at %s", n.Secret, expiry.UTC().Format(time.RFC3339)))
		case nearest.IsZero() || expiry.Before(nearest):
			nearest = expiry
		}
	}
	if len(problems) > 0 {
		p.CertificatesReady = Condition(c, etcdv1alpha1.ReasonSecretInvalid, problems, time.Time{}, now)
		return p.warnOnChange(c)
	}
	p.CertificatesReady = Condition(c, "", nil, nearest, now)
	// Look again when the nearest certificate expires, to report it.
	p.Recheck = minWait(p.Recheck, min(nearest.Sub(now)+time.Second, CertificatesRecheck))
	return p
}

// ForeignSecrets names, for a cluster whose certificates cert-manager
// issues, the Secrets its Certificates would have
// cert-manager write (it overwrites whatever Secret bears a Certificate's
// secretName) that belong to someone else: neither labelled for the
// cluster nor written by cert-manager for that Certificate. The operator
// creates no Certificate while one exists, so no one's Secret is lost.
func ForeignSecrets(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret) []string {
	var out []string
	for _, cert := range Certificates(c) {
		if why := foreignSecret(cert.Name, secrets[cert.Spec.SecretName], "cluster", map[string]string{etcdv1alpha1.LabelCluster: c.Name}); why != "" {
			out = append(out, why)
		}
	}
	return out
}

// ForeignTenantSecret is ForeignSecrets for s, the Secret of the name of
// tenant t's Certificate: "" when s is nil or the tenant's.
func ForeignTenantSecret(c *etcdv1alpha1.EtcdCluster, t *etcdv1alpha1.EtcdTenant, s *corev1.Secret) string {
	return foreignSecret(t.ClientCertificateName(), s, "tenant", map[string]string{etcdv1alpha1.LabelCluster: c.Name, etcdv1alpha1.LabelTenant: t.Name})
}

// foreignSecret says why s, the Secret of Certificate cert's name, is
// someone else's, which cert-manager would overwrite: neither written by
// cert-manager for that Certificate nor carrying every one of the
// owner's labels (the labels of the Secrets the operator has issued for
// the cluster or tenant, whose). "" when s is nil or the owner's.
func foreignSecret(cert string, s *corev1.Secret, whose string, owner map[string]string) string {
	if s == nil || s.Annotations[cmapi.CertificateNameKey] == cert {
		return ""
	}
	labels := make([]string, 0, len(owner))
	mine := true
	for k, v := range owner {
		labels = append(labels, k+"="+v)
		mine = mine && s.Labels[k] == v
	}
	if mine {
		return ""
	}
	slices.Sort(labels)
	return fmt.Sprintf("Secret %s exists and is not this %s's (no label %s): cert-manager would overwrite it, so the operator does not create Certificate %s; move that Secret away or delete it (the operator looks again every %s)",
		s.Name, whose, strings.Join(labels, ", "), cert, ForeignSecretRecheck)
}

// minWait is the sooner of two waits, 0 meaning none.
func minWait(a, b time.Duration) time.Duration {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// signingCAs are the certificates of the cluster's CAs that cert-manager
// has issued and that may sign, by CA name, and why the others may not: a
// user's issuer may ignore isCA and return a certificate that cannot
// sign, which neither enters the trust bundle nor signs.
func signingCAs(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret) (map[string]*x509.Certificate, []string) {
	cas := map[string]*x509.Certificate{}
	var refused []string
	for _, ca := range OwnCAs(c) {
		s := secrets[ca]
		if s == nil {
			continue
		}
		certs := parseValid(s.Data[builder.CertKey])
		if len(certs) == 0 {
			continue // Trust reports it
		}
		if why := NotCA(certs[0]); why != "" {
			refused = append(refused, fmt.Sprintf("Certificate %s, %s, came back from %s unable to sign: %s. %s", ca, caPurpose(c, ca), describeIssuer(caIssuer(c, ca)), why, caIssuerAdvice(c, ca)))
			continue
		}
		cas[ca] = certs[0]
	}
	return cas, refused
}

// failedCAs says which of the cluster's CAs a user's issuer failed to
// issue at the last attempt (cert-manager retries with a back-off).
func failedCAs(c *etcdv1alpha1.EtcdCluster, observed map[string]*cmapi.Certificate) []string {
	var failed []string
	for _, ca := range OwnCAs(c) {
		cert := observed[ca]
		if cert == nil || cert.Status.LastFailureTime == nil || UserIssuer(c, ca) == nil || NotIssued(cert) == "" {
			continue
		}
		failed = append(failed, fmt.Sprintf("%s could not issue Certificate %s, %s (%s). %s", describeIssuer(caIssuer(c, ca)), ca, caPurpose(c, ca), issuingMessage(cert), caIssuerAdvice(c, ca)))
	}
	return failed
}

// issuingMessage is what cert-manager says of a Certificate's last
// issuance: its Issuing condition, else its Ready condition.
func issuingMessage(cert *cmapi.Certificate) string {
	why := "the last attempt failed"
	for _, cond := range cert.Status.Conditions {
		switch cond.Type {
		case cmapi.CertificateConditionIssuing:
			return cond.Reason + ": " + cond.Message
		case cmapi.CertificateConditionReady:
			why = cond.Reason + ": " + cond.Message
		}
	}
	return why
}

// caPurpose says what the cluster's CA ca is, for messages.
func caPurpose(c *etcdv1alpha1.EtcdCluster, ca string) string {
	if ca == PeerCAName(c) {
		return "the CA of this cluster's own that signs its peer certificates"
	}
	return "the CA of this cluster's own that signs its server and client certificates"
}

// caIssuerAdvice says what a user's issuer must do and what to do when it
// cannot.
func caIssuerAdvice(c *etcdv1alpha1.EtcdCluster, ca string) string {
	field := "spec.security.tls.certManager.issuerRef"
	if ca == PeerCAName(c) {
		field = "spec.security.tls.certManager.peerIssuerRef"
	}
	return fmt.Sprintf("The issuer of %s must sign CA certificates (isCA): every cluster gets CAs of its own, so that a certificate the issuer signs for another cluster is never trusted here. "+
		"A CA issuer can; an ACME issuer and a Vault issuer on a pki/sign/<role> path cannot (cert-manager does not ask Vault for CA certificates; a path to Vault's sign-intermediate endpoint may do). "+
		"Use such an issuer, or remove %s to have the operator make a self-signed CA", field, field)
}

// describeIssuer names an issuer as "Kind name".
func describeIssuer(ref cmmeta.IssuerReference) string {
	return ref.Kind + " " + ref.Name
}

// gatherTrust builds the trust bundle from its sources and the previous
// bundle (none when fresh), and writes it when it changed. In managed
// mode only the CAs of cas are read, and legacy CAs go once no leaf needs
// them (ownTrust); the time returned is when to look again for them. Its
// error is a *SecretError.
func (p *Plan) gatherTrust(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret, cas map[string]*x509.Certificate, tenants []*corev1.Secret, fresh bool, now time.Time) (map[string][]byte, time.Time, error) {
	managed := c.Spec.Security.ManagedTLS()
	read := func(k builder.SecretKey) []byte {
		s := secrets[k.Secret]
		if s == nil {
			return nil
		}
		if managed && slices.Contains(OwnCAs(c), k.Secret) && cas[k.Secret] == nil && len(parseValid(s.Data[k.Key])) > 0 {
			return nil // a CA that cannot sign
		}
		return s.Data[k.Key]
	}
	name := builder.TrustBundleSecretName(c)
	previous := secrets[name]
	var prevData map[string][]byte
	if previous != nil && !fresh {
		prevData = previous.Data
	}
	bundle, err := Trust(TrustSources(c), read, prevData, now)
	if err != nil {
		return nil, time.Time{}, err
	}
	var recheck time.Time
	if managed {
		bundle, recheck = ownTrust(c, bundle, cas, Leaves(c, secrets, tenants), now)
	}
	if previous == nil || !maps.EqualFunc(bundle, previous.Data, bytes.Equal) {
		s := TrustBundleSecret(c, bundle)
		p.Writes = append(p.Writes, Write{Object: s, Event: &Event{corev1.EventTypeNormal, "TrustBundleUpdated",
			fmt.Sprintf("Secret %s now holds %s", name, DescribeTrust(bundle))}})
		secrets[name] = s
	}
	return bundle, recheck, nil
}

// releaseSigning is the trust gate: it refreshes the signing copy of each
// of the cluster's CAs that may sign (cas) and whose certificate the
// bundle holds, once every member Pod trusts the bundle (allTrust), and
// returns the CAs held back. A missing copy is made at once when the
// members already take what the CA signs: without a previous bundle it is
// the CA a new cluster starts with or, on a cluster created by an
// operator without the bundle and the copies, the CA its Issuer signed
// with until now; with one, the CA must be in it or chain to a CA in it
// (previous, what the members were started with or are being rolled
// onto): so it is on a cluster whose leaves an operator before per-cluster
// CAs had the user's issuer sign, whose CA that issuer signs now (the
// bundle keeps the issuer's CA until no leaf needs it, ownTrust). Any
// other missing copy waits like a renewed CA.
func (p *Plan) releaseSigning(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret, cas map[string]*x509.Certificate, bundle, previous map[string][]byte, allTrust bool, now time.Time) []string {
	var held []string
	for _, name := range OwnCAs(c) {
		ca := secrets[name]
		if ca == nil || cas[name] == nil {
			continue // cert-manager has not issued it yet, or it cannot sign
		}
		signing := secrets[SigningSecretName(name)]
		if signing != nil && bytes.Equal(signing.Data[builder.CertKey], ca.Data[builder.CertKey]) {
			continue
		}
		trusted := signing == nil && (previous == nil || trustedThrough(c, name, ca, previous, now))
		if !trusted && (!allTrust || !Trusts(c, bundle, name, ca.Data[builder.CertKey])) {
			held = append(held, name)
			continue
		}
		w := Write{Object: SigningSecret(c, ca)}
		if !trusted {
			w.Event = &Event{corev1.EventTypeNormal, "CARolledOut", fmt.Sprintf("Every member trusts the new %s: it signs from now on", name)}
		}
		p.Writes = append(p.Writes, w)
	}
	return held
}

// trustedThrough tells whether members trusting bundle take what the
// cluster's CA ca (its Secret s) signs: under each key it must be trusted
// in, the CA is in the bundle or chains to a CA there through the
// certificates its Secret carries (the rest of tls.crt, and ca.crt).
func trustedThrough(c *etcdv1alpha1.EtcdCluster, ca string, s *corev1.Secret, bundle map[string][]byte, now time.Time) bool {
	chain := parseValid(s.Data[builder.CertKey])
	if len(chain) == 0 {
		return false
	}
	intermediates := x509.NewCertPool()
	for _, cert := range append(chain[1:], parseValid(s.Data[builder.CAKey])...) {
		intermediates.AddCert(cert)
	}
	for _, key := range trustKeysOf(c, ca) {
		roots := x509.NewCertPool()
		for _, cert := range parseValid(bundle[key]) {
			roots.AddCert(cert)
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := chain[0].Verify(opts); err != nil {
			return false
		}
	}
	return true
}

// warnOnChange raises a warning when CertificatesReady is False with
// another message than the cluster's status holds.
func (p Plan) warnOnChange(c *etcdv1alpha1.EtcdCluster) Plan {
	cond := p.CertificatesReady
	if old := meta.FindStatusCondition(c.Status.Conditions, cond.Type); cond.Status == metav1.ConditionFalse && (old == nil || old.Message != cond.Message) {
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, cond.Reason, cond.Message})
	}
	return p
}

// Issuing names the cluster's Certificates that cert-manager has not
// issued (Ready) for the spec this pass applies, and why. A Certificate
// missing from observed, or whose spec is not the one applied, is one the
// pass creates or changes. A leaf of a CA held back until every member
// trusts it (held) is not waited for while its Secret holds a valid
// certificate: the members run on that one, and the roll the CA waits for
// must go on (no roll starts while CertificatesReady is False).
func Issuing(c *etcdv1alpha1.EtcdCluster, observed map[string]*cmapi.Certificate, held []string, secrets map[string]*corev1.Secret, now time.Time) []string {
	var waiting []string
	for _, want := range Certificates(c) {
		got := observed[want.Name]
		if got == nil {
			got = want
		}
		current := equality.Semantic.DeepDerivative(want.Spec, got.Spec)
		why := notIssued(got, current)
		if why == "" {
			continue
		}
		if slices.Contains(held, want.Spec.IssuerRef.Name) && want.Spec.IssuerRef.Kind == cmapi.IssuerKind {
			need := Need{Secret: want.Spec.SecretName, Keys: []string{builder.CertKey, builder.PrivateKeyKey}}
			if expiry, err := Check(need, secrets[need.Secret]); err == nil && expiry.After(now) {
				continue
			}
		}
		waiting = append(waiting, why)
	}
	return waiting
}

// NotIssued says why cert-manager has not issued a Certificate for its
// current spec yet; "" once it has.
func NotIssued(cert *cmapi.Certificate) string { return notIssued(cert, true) }

// notIssued says why cert-manager has not issued a Certificate for its
// current spec yet; "" once it has. A Certificate whose spec is about to
// change (not current) is not issued for it.
func notIssued(cert *cmapi.Certificate, current bool) string {
	why := "cert-manager has not looked at it yet"
	for _, cond := range cert.Status.Conditions {
		if cond.Type != cmapi.CertificateConditionReady {
			continue
		}
		if current && cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == cert.Generation {
			return ""
		}
		why = cond.Reason + ": " + cond.Message
	}
	return fmt.Sprintf("Certificate %s is not issued yet (%s)", cert.Name, why)
}
