package pki

import (
	"bytes"
	"fmt"
	"maps"
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
// each of the operator's CAs sign once every member Pod trusts it (the
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
	bundle, err := p.gatherTrust(c, secrets, now)
	if err != nil {
		p.CertificatesReady, p.CATrusted = Condition(c, etcdv1alpha1.ReasonSecretInvalid, []string{err.Error()}, time.Time{}, now), TrustUnknown(c, err.Error())
		return p.warnOnChange(c)
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
		held = p.releaseSigning(c, secrets, bundle, trusting == all)
	}
	p.CATrusted = TrustCondition(c, bundle, trusting, all, held)

	if managed {
		if issuing := Issuing(c, o.Certificates); len(issuing) > 0 {
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
	p.Recheck = min(nearest.Sub(now)+time.Second, CertificatesRecheck)
	return p
}

// gatherTrust builds the trust bundle from its sources and the previous
// bundle, and writes it when it changed. Its error is a *SecretError.
func (p *Plan) gatherTrust(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret, now time.Time) (map[string][]byte, error) {
	read := func(k builder.SecretKey) []byte {
		if s := secrets[k.Secret]; s != nil {
			return s.Data[k.Key]
		}
		return nil
	}
	name := builder.TrustBundleSecretName(c)
	previous := secrets[name]
	var prevData map[string][]byte
	if previous != nil {
		prevData = previous.Data
	}
	bundle, err := Trust(TrustSources(c), read, prevData, now)
	if err != nil {
		return nil, err
	}
	if previous == nil || !maps.EqualFunc(bundle, previous.Data, bytes.Equal) {
		s := TrustBundleSecret(c, bundle)
		p.Writes = append(p.Writes, Write{Object: s, Event: &Event{corev1.EventTypeNormal, "TrustBundleUpdated",
			fmt.Sprintf("Secret %s now holds %s", name, DescribeTrust(bundle))}})
		secrets[name] = s
	}
	return bundle, nil
}

// releaseSigning is the trust gate: it refreshes the signing copy of each
// of the operator's CAs whose certificate the bundle holds, once every
// member Pod trusts the bundle (allTrust), and returns the CAs held back.
// A missing copy is made at once: it is the CA a new cluster starts with,
// or, on a cluster created by an operator without the copies, the CA its
// Issuer signed with until now.
func (p *Plan) releaseSigning(c *etcdv1alpha1.EtcdCluster, secrets map[string]*corev1.Secret, bundle map[string][]byte, allTrust bool) []string {
	var held []string
	for _, name := range OwnCAs(c) {
		ca := secrets[name]
		if ca == nil {
			continue // cert-manager has not issued it yet
		}
		signing := secrets[SigningSecretName(name)]
		if signing != nil && bytes.Equal(signing.Data[builder.CertKey], ca.Data[builder.CertKey]) {
			continue
		}
		if signing != nil && (!allTrust || !Trusts(c, bundle, name, ca.Data[builder.CertKey])) {
			held = append(held, name)
			continue
		}
		w := Write{Object: SigningSecret(c, ca)}
		if signing != nil {
			w.Event = &Event{corev1.EventTypeNormal, "CARolledOut", fmt.Sprintf("Every member trusts the new %s: it signs from now on", name)}
		}
		p.Writes = append(p.Writes, w)
	}
	return held
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
// pass creates or changes.
func Issuing(c *etcdv1alpha1.EtcdCluster, observed map[string]*cmapi.Certificate) []string {
	var waiting []string
	for _, want := range Certificates(c) {
		got := observed[want.Name]
		if got == nil {
			got = want
		}
		current := equality.Semantic.DeepDerivative(want.Spec, got.Spec)
		if why := notIssued(got, current); why != "" {
			waiting = append(waiting, why)
		}
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
