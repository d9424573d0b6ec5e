package pki

import (
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

// tlsSecret is a Secret holding a certificate, its key and a CA, as
// cert-manager writes it for the Certificate of its name (the annotation
// does not matter where a user provides the Secret).
func tlsSecret(name string, crt, key, ca []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{cmapi.CertificateNameKey: name}}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{builder.CertKey: crt, builder.PrivateKeyKey: key, builder.CAKey: ca}}
}

// signed are the operator's CAs whose signing copy the plan writes.
func signed(p Plan) []string {
	var cas []string
	for _, w := range p.Writes {
		if name, ok := strings.CutSuffix(w.Object.GetName(), "-signing"); ok {
			cas = append(cas, name)
		}
	}
	return cas
}

// TestTrustGate checks when a pass lets the cluster's CAs sign with their
// current key: at once when no signing copy exists (a new cluster, or one
// made by an operator without the copies), otherwise only once every
// member Pod was started with a bundle holding the CA. The gate is the
// same for self-signed CAs and for CAs a user's issuer signs.
func TestTrustGate(t *testing.T) {
	t.Parallel()
	type pods int
	const (
		noPods pods = iota
		unannotated
		oneOnOldBundle
		allOnBundle
	)
	tests := []struct {
		name       string
		pods       pods
		oldSigning bool // the signing copies hold an older CA than the CA Secrets
		noPeerCA   bool // cert-manager has not issued the peer CA yet
		wantSigned []string
		wantHeld   []string
		wantStatus metav1.ConditionStatus
	}{
		{name: "new cluster: the CAs sign at once", pods: noPods, wantSigned: []string{"e-ca", "e-peer-ca"}, wantStatus: metav1.ConditionTrue},
		{name: "upgrade: copies made at once, the members are rolled", pods: unannotated, wantSigned: []string{"e-ca", "e-peer-ca"}, wantStatus: metav1.ConditionFalse},
		{name: "renewed CAs wait for the last member", pods: oneOnOldBundle, oldSigning: true, wantHeld: []string{"e-ca", "e-peer-ca"}, wantStatus: metav1.ConditionFalse},
		{name: "renewed CAs wait for members started without a bundle", pods: unannotated, oldSigning: true, wantHeld: []string{"e-ca", "e-peer-ca"}, wantStatus: metav1.ConditionFalse},
		{name: "renewed CAs sign once every member trusts them", pods: allOnBundle, oldSigning: true, wantSigned: []string{"e-ca", "e-peer-ca"}, wantStatus: metav1.ConditionTrue},
		{name: "a CA not issued yet holds nothing back", pods: noPods, noPeerCA: true, wantSigned: []string{"e-ca"}, wantStatus: metav1.ConditionTrue},
	}
	corp := &etcdv1alpha1.IssuerReference{Name: "corp", Kind: "ClusterIssuer"}
	specs := map[string]etcdv1alpha1.CertManagerSpec{"self-signed CAs": {}, "CAs of the user's issuer": {IssuerRef: corp, PeerIssuerRef: corp}}
	for _, tt := range tests {
		for kind, spec := range specs {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				now := time.Now()
				c := managed(spec)
				secrets := map[string]*corev1.Secret{}
				cas := []string{"e-ca", "e-peer-ca"}
				if tt.noPeerCA {
					cas = cas[:1]
				}
				for _, ca := range cas {
					crt, key := selfSigned(t, now.Add(240*time.Hour))
					secrets[ca] = tlsSecret(ca, crt, key, crt)
					if tt.oldSigning {
						old, oldKey := selfSigned(t, now.Add(120*time.Hour))
						secrets[SigningSecretName(ca)] = tlsSecret(SigningSecretName(ca), old, oldKey, old)
					}
				}
				// The bundle the pass gathers: the CA Secrets' certificates.
				bundle, err := Trust(TrustSources(c), func(k builder.SecretKey) []byte {
					if s := secrets[k.Secret]; s != nil {
						return s.Data[k.Key]
					}
					return nil
				}, nil, now)
				if err != nil {
					t.Fatal(err)
				}
				var hashes []string
				if tt.pods != noPods {
					for i := range 3 {
						hash := builder.TrustBundleHash(bundle)
						switch {
						case tt.pods == unannotated:
							hash = ""
						case tt.pods == oneOnOldBundle && i == 2:
							hash = "older"
						}
						hashes = append(hashes, hash)
					}
				}

				p := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: secrets, MemberTrustHashes: hashes, Now: now})
				if got := p.CATrusted.Status; got != tt.wantStatus {
					t.Errorf("CATrusted = %s (%s), want %s", got, p.CATrusted.Message, tt.wantStatus)
				}
				if got := signed(p); !slices.Equal(got, tt.wantSigned) {
					t.Errorf("the plan lets %v sign with their current key, want %v", got, tt.wantSigned)
				}
				for _, held := range tt.wantHeld {
					if !strings.Contains(p.CATrusted.Message, held) {
						t.Errorf("CATrusted does not name the held CA %s: %s", held, p.CATrusted.Message)
					}
				}
				var wroteBundle bool
				for _, w := range p.Writes {
					if s, ok := w.Object.(*corev1.Secret); ok && s.Name == "e-ca-bundle" {
						wroteBundle = builder.TrustBundleHash(s.Data) == builder.TrustBundleHash(bundle)
					}
				}
				if !wroteBundle {
					t.Error("the plan does not write the bundle it gathered")
				}
			})
		}
	}
}

// TestPlanCertificates checks what a pass writes, reports and waits for
// besides the trust gate.
func TestPlanCertificates(t *testing.T) {
	t.Parallel()
	now := time.Now()
	crt, key := selfSigned(t, now.Add(240*time.Hour))
	expires := now.Add(240 * time.Hour)
	c := managed(etcdv1alpha1.CertManagerSpec{})
	// Every Secret the cluster needs, issued by one CA, and the bundle and
	// signing copies already in place.
	issued := func() map[string]*corev1.Secret {
		s := map[string]*corev1.Secret{}
		for _, name := range []string{"e-ca", "e-peer-ca", "e-server-tls", "e-peer-tls", "e-client-tls"} {
			s[name] = tlsSecret(name, crt, key, crt)
		}
		for _, ca := range []string{"e-ca", "e-peer-ca"} {
			s[SigningSecretName(ca)] = tlsSecret(SigningSecretName(ca), crt, key, crt)
		}
		s["e-ca-bundle"] = TrustBundleSecret(c, map[string][]byte{builder.BundleServerCAKey: crt, builder.BundleClientCAKey: crt, builder.BundlePeerCAKey: crt})
		return s
	}
	ready := func() map[string]*cmapi.Certificate {
		certs := map[string]*cmapi.Certificate{}
		for _, want := range Certificates(c) {
			got := want.DeepCopy()
			got.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue}}
			certs[got.Name] = got
		}
		return certs
	}
	stale := ready()
	stale["e-server-tls"].Spec.DNSNames = []string{"old.example"}
	junk := issued()
	junk["e-ca"].Data[builder.CertKey] = []byte("junk")
	// A Secret of a Certificate's name that neither cert-manager wrote for
	// it nor the cluster labels: someone else's, which cert-manager would
	// overwrite.
	theirs := map[string]*corev1.Secret{"e-server-tls": {ObjectMeta: metav1.ObjectMeta{Name: "e-server-tls", Namespace: "ns"}, Data: map[string][]byte{"password": []byte("theirs")}}}
	labelled := issued()
	labelled["e-server-tls"].Annotations = nil
	labelled["e-server-tls"].Labels = map[string]string{etcdv1alpha1.LabelCluster: "e"}

	tests := []struct {
		name        string
		certManager bool
		secrets     map[string]*corev1.Secret
		certs       map[string]*cmapi.Certificate
		wantReason  string
		wantSays    string
		wantWrites  int
		wantRecheck time.Duration
	}{
		{name: "without cert-manager: nothing written, look again later", secrets: issued(), certs: ready(),
			wantReason: etcdv1alpha1.ReasonCertManagerMissing, wantSays: "cert-manager.io/v1", wantRecheck: CertManagerMissingRecheck},
		{name: "someone else's Secret of a Certificate's name: nothing written", certManager: true, secrets: theirs,
			wantReason: etcdv1alpha1.ReasonForeignObject, wantSays: "Secret e-server-tls exists and is not this cluster's", wantRecheck: ForeignSecretRecheck},
		{name: "a Secret labelled for the cluster is its own", certManager: true, secrets: labelled, certs: ready(),
			wantReason: etcdv1alpha1.ReasonCertificatesReady, wantSays: expires.UTC().Format(time.RFC3339), wantWrites: 3 + 5, wantRecheck: CertificatesRecheck},
		{name: "a new cluster: the objects, waiting for cert-manager", certManager: true,
			wantReason: etcdv1alpha1.ReasonIssuing, wantSays: "Certificate e-ca is not issued yet (cert-manager has not looked at it yet)", wantWrites: 3 + 5 + 1},
		{name: "a Certificate whose spec changes is not issued for it", certManager: true, secrets: issued(), certs: stale,
			wantReason: etcdv1alpha1.ReasonIssuing, wantSays: "Certificate e-server-tls is not issued yet", wantWrites: 3 + 5},
		{name: "a CA Secret that holds no certificate", certManager: true, secrets: junk, certs: ready(),
			wantReason: etcdv1alpha1.ReasonSecretInvalid, wantSays: "Secret e-ca: tls.crt", wantWrites: 3 + 5},
		{name: "all issued: ready until the nearest expiry", certManager: true, secrets: issued(), certs: ready(),
			wantReason: etcdv1alpha1.ReasonCertificatesReady, wantSays: expires.UTC().Format(time.RFC3339), wantWrites: 3 + 5, wantRecheck: CertificatesRecheck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := PlanCertificates(Observed{Cluster: c, CertManager: tt.certManager, Secrets: tt.secrets, Certificates: tt.certs, Now: now})
			if got := p.CertificatesReady; got.Reason != tt.wantReason || !strings.Contains(got.Message, tt.wantSays) {
				t.Errorf("CertificatesReady = %s: %s, want %s saying %q", got.Reason, got.Message, tt.wantReason, tt.wantSays)
			}
			if len(p.Writes) != tt.wantWrites {
				t.Errorf("%d writes, want %d", len(p.Writes), tt.wantWrites)
			}
			if p.Recheck != tt.wantRecheck {
				t.Errorf("Recheck = %s, want %s", p.Recheck, tt.wantRecheck)
			}
			warned := len(p.Events) > 0 && p.Events[len(p.Events)-1].Type == corev1.EventTypeWarning
			if warned != (tt.wantReason != etcdv1alpha1.ReasonCertificatesReady) {
				t.Errorf("warning event: %v, want %v", warned, !warned)
			}
		})
	}
}

// TestFreshBundle checks that a cluster trusting nothing yet (not formed,
// no member Pod) gets a bundle of its current CAs only, while any other
// keeps the CAs its bundle held.
func TestFreshBundle(t *testing.T) {
	t.Parallel()
	now := time.Now()
	old, _ := selfSigned(t, now.Add(100*time.Hour))
	current, key := selfSigned(t, now.Add(200*time.Hour))
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
		PeerSecret: "peer", PeerTrustedCASecret: "peer-ca",
	}}}}
	secrets := map[string]*corev1.Secret{
		"peer":        tlsSecret("peer", current, key, current),
		"peer-ca":     tlsSecret("peer-ca", current, key, current),
		"e-ca-bundle": TrustBundleSecret(c, map[string][]byte{builder.BundlePeerCAKey: old}),
	}
	for _, tt := range []struct {
		name      string
		clusterID string
		pods      []string
		want      int
	}{
		{name: "not formed, no Pod: the current CA only", want: 1},
		{name: "not formed, a Pod started: both", pods: []string{"h"}, want: 2},
		{name: "formed, its Pods gone: both", clusterID: "1f2e", want: 2},
	} {
		cc := c.DeepCopy()
		cc.Status.ClusterID = tt.clusterID
		p := PlanCertificates(Observed{Cluster: cc, Secrets: secrets, MemberTrustHashes: tt.pods, Now: now})
		got := secrets["e-ca-bundle"].Data
		for _, w := range p.Writes {
			if w.Object.GetName() == "e-ca-bundle" {
				got = w.Object.(*corev1.Secret).Data
			}
		}
		if n := len(parseValid(got[builder.BundlePeerCAKey])); n != tt.want {
			t.Errorf("%s: the bundle holds %d peer CAs, want %d", tt.name, n, tt.want)
		}
	}
}

// TestNewClusterSigns checks that the CAs of a new cluster sign as soon as
// cert-manager issues them, on the first pass or a later one, without a
// roll-out event: no member trusts anything yet.
func TestNewClusterSigns(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	crt, key := selfSigned(t, now.Add(240*time.Hour))
	secrets := map[string]*corev1.Secret{
		"e-ca":        tlsSecret("e-ca", crt, key, crt),
		"e-peer-ca":   tlsSecret("e-peer-ca", crt, key, crt),
		"e-ca-bundle": TrustBundleSecret(c, map[string][]byte{}), // written by the pass before the CAs
	}
	p := PlanCertificates(Observed{Cluster: c, CertManager: true, Secrets: secrets, Now: now})
	if got := signed(p); !slices.Equal(got, []string{"e-ca", "e-peer-ca"}) {
		t.Errorf("the plan lets %v sign, want both CAs", got)
	}
	for _, w := range p.Writes {
		if w.Event != nil && w.Event.Reason == "CARolledOut" {
			t.Errorf("a new cluster's CA is announced as rolled out: %s", w.Event.Message)
		}
	}
}

// TestForeignTenantSecret: a Secret of the name of a tenant's Certificate
// is the tenant's when cert-manager wrote it for that Certificate or it
// carries the tenant's labels; any other is someone else's, which
// cert-manager would overwrite.
func TestForeignTenantSecret(t *testing.T) {
	t.Parallel()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	tenant := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdTenantSpec{ClusterName: c.Name}}
	secret := func(labels, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tenant.ClientCertificateName(), Namespace: "ns", Labels: labels, Annotations: annotations}}
	}
	tests := []struct {
		name    string
		secret  *corev1.Secret
		foreign bool
	}{
		{"none yet", nil, false},
		{"written by cert-manager for the Certificate", secret(nil, map[string]string{cmapi.CertificateNameKey: tenant.ClientCertificateName()}), false},
		{"labelled for the tenant", secret(map[string]string{etcdv1alpha1.LabelCluster: c.Name, etcdv1alpha1.LabelTenant: "t"}, nil), false},
		{"someone else's", secret(nil, nil), true},
		{"another tenant's", secret(map[string]string{etcdv1alpha1.LabelCluster: c.Name, etcdv1alpha1.LabelTenant: "u"}, nil), true},
		{"written by cert-manager for another Certificate", secret(nil, map[string]string{cmapi.CertificateNameKey: "other"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			why := ForeignTenantSecret(c, tenant, tt.secret)
			if (why != "") != tt.foreign {
				t.Errorf("ForeignTenantSecret = %q, want foreign %v", why, tt.foreign)
			}
			if tt.foreign && !strings.Contains(why, "Secret t-etcd-client exists and is not this tenant's") {
				t.Errorf("ForeignTenantSecret = %q, does not name the Secret", why)
			}
		})
	}
}
