package controllers

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/pki"
)

// TestTrustGate checks, against a real API server, when the PKI
// reconciler lets the operator's CAs sign with their current key: at once
// when no signing copy exists (a new cluster, or one made by an operator
// without the copies), otherwise only once every member Pod was started
// with a bundle holding the CA.
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
		{name: "new cluster: the CAs sign at once", pods: noPods, wantSigned: []string{"g-ca", "g-peer-ca"}, wantStatus: metav1.ConditionTrue},
		{name: "upgrade: copies made at once, the members are rolled", pods: unannotated, wantSigned: []string{"g-ca", "g-peer-ca"}, wantStatus: metav1.ConditionFalse},
		{name: "renewed CAs wait for the last member", pods: oneOnOldBundle, oldSigning: true, wantHeld: []string{"g-ca", "g-peer-ca"}, wantStatus: metav1.ConditionFalse},
		{name: "renewed CAs sign once every member trusts them", pods: allOnBundle, oldSigning: true, wantSigned: []string{"g-ca", "g-peer-ca"}, wantStatus: metav1.ConditionTrue},
		{name: "a CA not issued yet holds nothing back", pods: noPods, noPeerCA: true, wantSigned: []string{"g-ca"}, wantStatus: metav1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(ctx, t)
			// Never created: the manager's reconcilers leave the namespace alone.
			c := &etcdv1alpha1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g", UID: "uid-g"},
				Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}},
			}
			cas := []string{"g-ca", "g-peer-ca"}
			if tt.noPeerCA {
				cas = cas[:1]
			}
			for _, ca := range cas {
				crt, key := testPair(t)
				create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ca}, Type: corev1.SecretTypeTLS,
					Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": crt}})
				if tt.oldSigning {
					old, oldKey := testPair(t)
					create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pki.SigningSecretName(ca)}, Type: corev1.SecretTypeTLS,
						Data: map[string][]byte{"tls.crt": old, "tls.key": oldKey, "ca.crt": old}})
				}
			}
			// The bundle the pass will gather: the CA Secrets' certificates.
			secrets := secretReader{r: k8sClient, ns: ns, read: map[string]*corev1.Secret{}}
			want, err := pki.Trust(pki.TrustSources(c), func(k builder.SecretKey) []byte {
				s, _ := secrets.get(ctx, k.Secret)
				if s == nil {
					return nil
				}
				return s.Data[k.Key]
			}, nil, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tt.pods != noPods {
				for i, name := range []string{"g-0", "g-1", "g-2"} {
					hash := builder.TrustBundleHash(want)
					switch {
					case tt.pods == unannotated:
						hash = ""
					case tt.pods == oneOnOldBundle && i == 2:
						hash = "older"
					}
					pod := builder.MemberPod(c, builder.Member{Name: name, TrustBundleHash: hash})
					pod.OwnerReferences = nil
					create(ctx, t, pod)
				}
			}

			r := &PKIReconciler{Client: k8sClient}
			cond, err := r.trust(ctx, c, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if cond.Status != tt.wantStatus {
				t.Errorf("CATrusted = %s (%s), want %s", cond.Status, cond.Message, tt.wantStatus)
			}
			for _, ca := range []string{"g-ca", "g-peer-ca"} {
				caSecret, signing := &corev1.Secret{}, &corev1.Secret{}
				_ = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: ca}, caSecret)
				_ = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.SigningSecretName(ca)}, signing)
				signs := len(caSecret.Data["tls.crt"]) > 0 && bytes.Equal(signing.Data["tls.crt"], caSecret.Data["tls.crt"]) &&
					bytes.Equal(signing.Data["tls.key"], caSecret.Data["tls.key"])
				if signs != slices.Contains(tt.wantSigned, ca) {
					t.Errorf("%s signs with its current key: %v, want %v", ca, signs, !signs)
				}
			}
			bundle := &corev1.Secret{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-ca-bundle"}, bundle); err != nil {
				t.Fatal(err)
			}
			if builder.TrustBundleHash(bundle.Data) != builder.TrustBundleHash(want) {
				t.Error("the bundle applied is not the one gathered")
			}
			for _, held := range tt.wantHeld {
				if !bytes.Contains([]byte(cond.Message), []byte(held)) {
					t.Errorf("CATrusted does not name the held CA %s: %s", held, cond.Message)
				}
			}
		})
	}
}

func create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}
