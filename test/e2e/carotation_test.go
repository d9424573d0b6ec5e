package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/pki"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// secretData reads one key of a Secret.
func secretData(ctx context.Context, t *testing.T, ns, name, key string) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
}

// poolOf is a pool of the PEM certificates of data.
func poolOf(t *testing.T, data []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("no PEM certificate in %q", data)
	}
	return pool
}

// countCerts counts the PEM certificates of data.
func countCerts(data []byte) int {
	return bytes.Count(data, []byte("-----BEGIN CERTIFICATE-----"))
}

// assertCARotation has cert-manager replace both of a managed cluster's
// CAs (new keys, as at their scheduled renewal) while a writer that
// trusts only the old CAs writes, and checks the whole rotation: the
// trust bundle takes the new CAs at once, the new CAs sign nothing until
// every member was restarted trusting them, no acknowledged write is lost
// and peers never lose each other; then the leaves are renewed by the new
// CAs (under a writer holding the bundle), every member serves them on
// both ports, and the old root certificate is still accepted.
func assertCARotation(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ns, key := c.Namespace, client.ObjectKeyFromObject(c)
	clientCA, peerCA := pki.ClientCAName(c), pki.PeerCAName(c)
	bundleName := builder.TrustBundleSecretName(c)
	oldClientCA, oldPeerCA := secretData(ctx, t, ns, clientCA, "tls.crt"), secretData(ctx, t, ns, peerCA, "tls.crt")
	oldBundle := secretData(ctx, t, ns, bundleName, builder.BundleServerCAKey)
	if !bytes.Equal(oldBundle, oldClientCA) {
		t.Fatalf("the trust bundle's ca.crt is not the client CA before the rotation")
	}
	oldRoot, _ := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
	oldPeer, _ := secretPair(ctx, t, ns, builder.PeerTLSSecretName(c))

	finish := support.StartWriter(ctx, t, tlsClient(ctx, t, ns, c.Name, poolOf(t, oldClientCA), oldRoot))
	start := time.Now()
	renew(ctx, t, ns, clientCA, peerCA)
	support.Eventually(t, 2*time.Minute, "the trust bundle to hold the old and the new CAs", func() error {
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundleName}, s); err != nil {
			return err
		}
		for _, k := range []string{builder.BundleServerCAKey, builder.BundleClientCAKey, builder.BundlePeerCAKey} {
			if n := countCerts(s.Data[k]); n != 2 {
				return fmt.Errorf("%s holds %d CAs", k, n)
			}
		}
		return nil
	})
	t.Logf("the trust bundle held both CAs %s after the CAs were renewed", time.Since(start).Round(time.Second))
	// No member has restarted with the new bundle yet: the new CAs must
	// not sign.
	for ca, old := range map[string][]byte{clientCA: oldClientCA, peerCA: oldPeerCA} {
		if signing := secretData(ctx, t, ns, pki.SigningSecretName(ca), "tls.crt"); !bytes.Equal(signing, old) {
			t.Errorf("%s signs with its new key before every member trusts it", ca)
		}
		if now := secretData(ctx, t, ns, ca, "tls.crt"); bytes.Equal(now, old) {
			t.Errorf("cert-manager did not renew %s", ca)
		}
	}
	// The PKI reconciler reports the roll in the pass after it applies
	// the bundle: wait for it rather than read once.
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "2 peer CAs", "the others are restarted")

	// A leaf renewed meanwhile (as cert-manager does on its own schedule)
	// still comes from the old CA, which every member trusts.
	oldPeerLeaf := secretData(ctx, t, ns, builder.PeerTLSSecretName(c), "tls.crt")
	renew(ctx, t, ns, builder.PeerTLSSecretName(c))
	support.Eventually(t, time.Minute, "the peer certificate to be renewed during the roll", func() error {
		if bytes.Equal(secretData(ctx, t, ns, builder.PeerTLSSecretName(c), "tls.crt"), oldPeerLeaf) {
			return fmt.Errorf("not renewed yet")
		}
		return nil
	})
	if err := signedBy(secretData(ctx, t, ns, builder.PeerTLSSecretName(c), "tls.crt"), oldPeerCA); err != nil {
		t.Errorf("the peer certificate renewed during the roll is not from the old peer CA: %v", err)
	} else {
		t.Log("the peer certificate renewed during the roll was signed by the old peer CA")
	}
	support.Eventually(t, 8*time.Minute, "every member to trust the new CAs and the new CAs to sign", func() error {
		signing := 0
		for _, ca := range []string{clientCA, peerCA} {
			if bytes.Equal(secretData(ctx, t, ns, pki.SigningSecretName(ca), "tls.crt"), secretData(ctx, t, ns, ca, "tls.crt")) {
				signing++
			}
		}
		if signing > 0 {
			// From the moment a new CA signs, every member must trust it.
			assertAllTrust(ctx, t, c)
		}
		if signing < 2 {
			return fmt.Errorf("%d of the 2 new CAs sign", signing)
		}
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionCATrusted); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("CATrusted is %v", cond)
		}
		if c.Status.ReadyReplicas != 3 {
			return fmt.Errorf("%d members Ready", c.Status.ReadyReplicas)
		}
		return nil
	})
	t.Logf("every member was restarted trusting the new CAs, and they sign, %s after the CAs were renewed", time.Since(start).Round(time.Second))
	finish()
	bundle, pods := assertAllTrust(ctx, t, c)

	// The leaves, renewed now, come from the new CAs; a client holding the
	// bundle keeps writing through the switch.
	bundleRoots := poolOf(t, bundle.Data[builder.BundleServerCAKey])
	finish = support.StartWriter(ctx, t, tlsClient(ctx, t, ns, c.Name, bundleRoots, oldRoot))
	start = time.Now()
	renew(ctx, t, ns, builder.ServerTLSSecretName(c), builder.PeerTLSSecretName(c), builder.ClientTLSSecretName(c))
	newClientCA := secretData(ctx, t, ns, clientCA, "tls.crt")
	newClientRoots := poolOf(t, newClientCA)
	newPeerRoots := poolOf(t, secretData(ctx, t, ns, peerCA, "tls.crt"))
	support.Eventually(t, 3*time.Minute, "every member to serve leaves of the new CAs on both ports", func() error {
		if !bytes.Equal(secretData(ctx, t, ns, builder.ClientTLSSecretName(c), "ca.crt"), newClientCA) {
			return fmt.Errorf("the operator's client certificate is not from the new client CA yet")
		}
		for i := range pods.Items {
			for port, pair := range map[string]struct {
				roots *x509.CertPool
				cert  *tls.Certificate
			}{"2379": {newClientRoots, oldRoot}, "2380": {newPeerRoots, oldPeer}} {
				if _, err := servedLeaf(c, &pods.Items[i], port, pair.roots, pair.cert); err != nil {
					return err
				}
			}
		}
		return nil
	})
	t.Logf("every member served leaves of the new CAs %s after their renewal", time.Since(start).Round(time.Second))
	finish()
	newRoot, _ := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
	// Both the new root certificate and the old one (its CA is still in
	// the bundle) write.
	for what, cert := range map[string]*tls.Certificate{"new": newRoot, "old": oldRoot} {
		cli := tlsClient(ctx, t, ns, c.Name, bundleRoots, cert)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(cctx, "/ca-rotation/"+what, "ok")
		cancel()
		if err != nil {
			t.Errorf("a client with the %s root certificate cannot write: %v", what, err)
		}
	}
	assertMembers(ctx, t, tlsClient(ctx, t, ns, c.Name, bundleRoots, newRoot), ns, 3)
}

// assertAllTrust checks that every member Pod of c was started with the
// current trust bundle and none is terminating; it returns the bundle and
// the Pods.
func assertAllTrust(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) (*corev1.Secret, *corev1.PodList) {
	t.Helper()
	bundle := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.TrustBundleSecretName(c)}, bundle); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if got := p.Annotations[etcdv1alpha1.AnnotationTrustBundleHash]; got != builder.TrustBundleHash(bundle.Data) || p.DeletionTimestamp != nil {
			t.Errorf("a new CA signs while member %s was started with trust bundle %q (current %q), terminating: %v",
				p.Name, got, builder.TrustBundleHash(bundle.Data), p.DeletionTimestamp != nil)
		}
	}
	return bundle, pods
}

// signedBy checks that the first certificate of leafPEM was signed by the
// CA certificate caPEM.
func signedBy(leafPEM, caPEM []byte) error {
	leaf, err := firstCert(leafPEM)
	if err != nil {
		return err
	}
	ca, err := firstCert(caPEM)
	if err != nil {
		return err
	}
	return leaf.CheckSignatureFrom(ca)
}

func firstCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}
