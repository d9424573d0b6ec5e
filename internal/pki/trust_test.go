package pki

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

func TestTrustSources(t *testing.T) {
	t.Parallel()
	key := func(s, k string) builder.SecretKey { return builder.SecretKey{Secret: s, Key: k} }
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		want    map[string][]builder.SecretKey
	}{
		{
			name:    "managed: the cluster's own CAs, nothing the leaves carry",
			cluster: managed(etcdv1alpha1.CertManagerSpec{}),
			want: map[string][]builder.SecretKey{
				"ca.crt":        {key("e-ca", "tls.crt")},
				"client-ca.crt": {key("e-ca", "tls.crt")},
				"peer-ca.crt":   {key("e-peer-ca", "tls.crt")},
			},
		},
		{
			name:    "managed with the user's issuers: the same, not the issuers' CA",
			cluster: managed(etcdv1alpha1.CertManagerSpec{IssuerRef: &etcdv1alpha1.IssuerReference{Name: "corp"}, PeerIssuerRef: &etcdv1alpha1.IssuerReference{Name: "corp"}}),
			want: map[string][]builder.SecretKey{
				"ca.crt":        {key("e-ca", "tls.crt")},
				"client-ca.crt": {key("e-ca", "tls.crt")},
				"peer-ca.crt":   {key("e-peer-ca", "tls.crt")},
			},
		},
		{
			name: "user's Secrets",
			cluster: &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
				PeerSecret: "peer", PeerTrustedCASecret: "peer-ca", ServerSecret: "server", ServerTrustedCASecret: "server-ca",
			}}}},
			want: map[string][]builder.SecretKey{"ca.crt": {key("server-ca", "ca.crt")}, "peer-ca.crt": {key("peer-ca", "ca.crt")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := TrustSources(tt.cluster); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TrustSources = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTrust(t *testing.T) {
	t.Parallel()
	now := time.Now()
	old, _ := selfSigned(t, now.Add(24*time.Hour))
	renewed, _ := selfSigned(t, now.Add(48*time.Hour))
	expired, _ := selfSigned(t, now.Add(-time.Minute))
	ca := builder.SecretKey{Secret: "e-ca", Key: "tls.crt"}
	leaf := builder.SecretKey{Secret: "e-server-tls", Key: "ca.crt"}
	sources := map[string][]builder.SecretKey{"ca.crt": {leaf, ca}}
	cat := func(pems ...[]byte) []byte { return bytes.Join(pems, nil) }
	tests := []struct {
		name     string
		read     map[builder.SecretKey][]byte
		previous []byte
		want     []byte
		wantErr  bool
	}{
		{name: "nothing issued yet", want: nil},
		{name: "one CA in two Secrets: once", read: map[builder.SecretKey][]byte{ca: old, leaf: old}, want: old},
		{name: "the CA renewed before its leaves: both", read: map[builder.SecretKey][]byte{ca: renewed, leaf: old}, want: cat(old, renewed)},
		{name: "the replaced CA stays until it expires", read: map[builder.SecretKey][]byte{ca: renewed, leaf: renewed}, previous: old, want: cat(old, renewed)},
		{name: "an order change is no change", read: map[builder.SecretKey][]byte{ca: renewed, leaf: old}, previous: cat(renewed, old), want: cat(old, renewed)},
		{name: "expired CAs go", read: map[builder.SecretKey][]byte{ca: renewed, leaf: renewed}, previous: cat(expired, old), want: cat(old, renewed)},
		{name: "junk in the previous bundle goes", read: map[builder.SecretKey][]byte{ca: old}, previous: []byte("junk"), want: old},
		{name: "junk in a source is a SecretError", read: map[builder.SecretKey][]byte{ca: []byte("junk")}, wantErr: true},
		{name: "a CA Secret gives its CA, not the chain of its issuer", read: map[builder.SecretKey][]byte{ca: cat(renewed, old)}, want: renewed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Trust(sources, func(k builder.SecretKey) []byte { return tt.read[k] }, map[string][]byte{"ca.crt": tt.previous}, now)
			var bad *SecretError
			if (err != nil) != tt.wantErr || err != nil && (!errors.As(err, &bad) || bad.Secret != "e-ca" || bad.Key != "tls.crt") {
				t.Fatalf("Trust error = %v, want a SecretError naming e-ca tls.crt: %v", err, tt.wantErr)
			}
			if !bytes.Equal(got["ca.crt"], tt.want) {
				t.Errorf("Trust = %d certificates, want %d", len(parseValid(got["ca.crt"])), len(parseValid(tt.want)))
			}
			if _, has := got["ca.crt"]; has != (len(tt.want) > 0) {
				t.Errorf("bundle has ca.crt: %v, want %v", has, len(tt.want) > 0)
			}
		})
	}
}

func TestTrusts(t *testing.T) {
	t.Parallel()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	a, _ := selfSigned(t, time.Now().Add(time.Hour))
	b, _ := selfSigned(t, time.Now().Add(2*time.Hour))
	both := append(append([]byte{}, a...), b...)
	// The client CA must be in the server and client keys, the peer CA in
	// the peer key.
	if !Trusts(c, map[string][]byte{"ca.crt": both, "client-ca.crt": both}, "e-ca", b) {
		t.Error("the client CA in both its keys is not trusted")
	}
	if Trusts(c, map[string][]byte{"ca.crt": both, "client-ca.crt": a}, "e-ca", b) {
		t.Error("the client CA missing from client-ca.crt is trusted")
	}
	if !Trusts(c, map[string][]byte{"ca.crt": a, "client-ca.crt": a}, "e-ca", both) {
		t.Error("a CA Secret's chain (the CA, then its issuer's) must be trusted for its CA alone")
	}
	if !Trusts(c, map[string][]byte{"peer-ca.crt": both}, "e-peer-ca", a) || Trusts(c, map[string][]byte{"ca.crt": both}, "e-peer-ca", a) {
		t.Error("the peer CA is judged by another key than peer-ca.crt")
	}
	if Trusts(c, map[string][]byte{"peer-ca.crt": both}, "e-peer-ca", nil) {
		t.Error("no CA at all is trusted")
	}
}

func TestSigningAndSecrets(t *testing.T) {
	t.Parallel()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e-ca"}, Data: map[string][]byte{"tls.crt": []byte("C"), "tls.key": []byte("K"), "ca.crt": []byte("C")}}
	s := SigningSecret(c, ca)
	if s.Name != "e-ca-signing" || s.Type != corev1.SecretTypeTLS || !reflect.DeepEqual(s.Data, ca.Data) || s.OwnerReferences[0].UID != "uid" {
		t.Errorf("SigningSecret = %+v", s)
	}
	want := []string{"e-ca-bundle", "e-client-tls", "e-peer-tls", "e-server-tls", "e-ca", "e-ca-signing", "e-peer-ca", "e-peer-ca-signing"}
	if got := SecretsOf(c); !reflect.DeepEqual(got, want) {
		t.Errorf("SecretsOf = %v, want %v", got, want)
	}
	if got := DescribeTrust(map[string][]byte{"ca.crt": ca.Data["tls.crt"]}); got != "no CA yet" {
		t.Errorf("DescribeTrust of junk = %q", got)
	}
}

func TestTrustCondition(t *testing.T) {
	t.Parallel()
	c := managed(etcdv1alpha1.CertManagerSpec{})
	c.Generation = 4
	a, _ := selfSigned(t, time.Now().Add(time.Hour))
	b, _ := selfSigned(t, time.Now().Add(2*time.Hour))
	bundle := map[string][]byte{"ca.crt": append(append([]byte{}, a...), b...), "peer-ca.crt": a}
	got := TrustCondition(c, bundle, 3, 3, nil)
	if got.Status != metav1.ConditionTrue || got.Reason != etcdv1alpha1.ReasonAllMembersTrust || got.ObservedGeneration != 4 ||
		got.Message != "All 3 member Pods were started trusting the CAs of Secret e-ca-bundle (2 server CAs, 1 peer CA)" {
		t.Errorf("all trusting: %+v", got)
	}
	got = TrustCondition(c, bundle, 1, 3, []string{"e-ca", "e-peer-ca"})
	if got.Status != metav1.ConditionFalse || got.Reason != etcdv1alpha1.ReasonRollingOut ||
		got.Message != "1 of 3 member Pods were started trusting the CAs of Secret e-ca-bundle (2 server CAs, 1 peer CA); the others are restarted one at a time (the Progressing condition says what the roll waits for); the old keys of e-ca and e-peer-ca sign until every member trusts the new ones" {
		t.Errorf("rolling out: %+v", got)
	}
}

func TestTrustUnknown(t *testing.T) {
	t.Parallel()
	got := TrustUnknown(managed(etcdv1alpha1.CertManagerSpec{}), "Secret x: ca.crt: no PEM certificate")
	if got.Status != metav1.ConditionUnknown || got.Reason != etcdv1alpha1.ReasonTrustUnknown || got.Message != "The trust bundle e-ca-bundle cannot be gathered: Secret x: ca.crt: no PEM certificate" {
		t.Errorf("TrustUnknown = %+v", got)
	}
}
