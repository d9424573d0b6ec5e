package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// testPair is a self-signed certificate and its key, in PEM.
func testPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(240 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestUserSecretsAreValidated checks that a cluster with user-provided
// Secrets gets no member Pod while a Secret is missing or lacks a key,
// that the condition names them, and that the operator never writes them.
func TestUserSecretsAreValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-tls"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
			PeerSecret: "peer", PeerTrustedCASecret: "ca", ServerSecret: "server", ServerTrustedCASecret: "ca",
		}}},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	awaitMessage := func(condType string, status metav1.ConditionStatus, says string) {
		t.Helper()
		eventually(t, 20*time.Second, condType+" saying "+says, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
				return err
			}
			c := meta.FindStatusCondition(cluster.Status.Conditions, condType)
			if c == nil || c.Status != status || !strings.Contains(c.Message, says) {
				return fmt.Errorf("%s is %v", condType, c)
			}
			return nil
		})
	}
	awaitMessage(etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, "Secret ca does not exist; Secret peer does not exist; Secret server does not exist")
	awaitMessage(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "waiting for the certificates before creating the member's Pod: Secret ca does not exist")
	if !hasManagedStatus(cluster, PKIFieldManager) {
		t.Errorf("status is not owned by field manager %s", PKIFieldManager)
	}

	certPEM, keyPEM := testPair(t)
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string][]byte{"ca.crt": certPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer"}, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server"}, Data: map[string][]byte{"tls.crt": certPEM}},
	}
	for _, s := range secrets {
		if err := k8sClient.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	awaitMessage(etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, "Secret server has no tls.key")
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("%d Pods created while the certificates are not ready", len(pods.Items))
	}

	secrets[2].Data["tls.key"] = keyPEM
	if err := k8sClient.Update(ctx, secrets[2]); err != nil {
		t.Fatal(err)
	}
	awaitMessage(etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "the nearest expires at")
	eventually(t, 20*time.Second, "the first member's Pod", func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "user-tls-0"}, &corev1.Pod{})
	})
	// The members trust the CAs of the bundle, which the user's CA
	// Secret fills; a second CA added to it is gathered too.
	bundle := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "user-tls-ca-bundle"}, bundle); err != nil {
		t.Fatal(err)
	}
	if string(bundle.Data["ca.crt"]) != string(certPEM) || string(bundle.Data["peer-ca.crt"]) != string(certPEM) || len(bundle.Data) != 2 {
		t.Errorf("trust bundle = %v, want ca.crt and peer-ca.crt holding the CA", bundle.Data)
	}
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "user-tls-0"}, pod); err != nil {
		t.Fatal(err)
	}
	if got, want := pod.Annotations[etcdv1alpha1.AnnotationTrustBundleHash], builder.TrustBundleHash(bundle.Data); got != want {
		t.Errorf("the member Pod was started with trust bundle %q, want %q", got, want)
	}
	awaitMessage(etcdv1alpha1.ConditionCATrusted, metav1.ConditionTrue, "(1 server CA, 1 peer CA)")
	newCA, _ := testPair(t)
	secrets[0].Data["ca.crt"] = append(append([]byte{}, certPEM...), newCA...)
	if err := k8sClient.Update(ctx, secrets[0]); err != nil {
		t.Fatal(err)
	}
	awaitMessage(etcdv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "(2 server CAs, 2 peer CAs); the others are restarted one at a time")
	for _, s := range secrets {
		got := &corev1.Secret{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			t.Fatal(err)
		}
		for _, mf := range got.ManagedFields {
			if strings.HasPrefix(mf.Manager, "etcd-operator") {
				t.Errorf("the operator wrote the user's Secret %s", s.Name)
			}
		}
	}
}

// TestManagedTLSWaitsForCertManager checks that without cert-manager an
// operator-managed cluster says so and creates no Pod.
func TestManagedTLSWaitsForCertManager(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(ctx, t), Name: "managed"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, etcdv1alpha1.ReasonCertManagerMissing)
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(cluster.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("%d Pods created without certificates", len(pods.Items))
	}
}

// TestSharedClientCAIsRefused checks, across namespaces, that a cluster
// with user-provided Secrets whose client CA an older cluster already
// trusts gets no member Pod and is told why, that the older one is not
// disturbed, and that a client CA of its own lets it go on.
func TestSharedClientCAIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	caPEM, keyPEM := testPair(t)
	userCluster := func(ns string, ca, key []byte) *etcdv1alpha1.EtcdCluster {
		t.Helper()
		for _, s := range []*corev1.Secret{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string][]byte{"ca.crt": ca}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server"}, Data: map[string][]byte{"tls.crt": ca, "tls.key": key}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"}, Data: map[string][]byte{"tls.crt": ca, "tls.key": key}},
		} {
			if err := k8sClient.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		c := &etcdv1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{
				ServerSecret: "server", ServerTrustedCASecret: "ca", ClientSecret: "client", ClientTrustedCASecret: "ca",
			}}},
		}
		if err := k8sClient.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := userCluster(newNamespace(ctx, t), caPEM, keyPEM)
	awaitCondition(ctx, t, first, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, etcdv1alpha1.ReasonCertificatesReady)
	// Creation times have a resolution of one second, and a tie goes by
	// namespace: the second cluster must be created in a later second to
	// be the newer one.
	time.Sleep(time.Until(first.CreationTimestamp.Add(time.Second)))
	second := userCluster(newNamespace(ctx, t), caPEM, keyPEM)
	awaitCondition(ctx, t, second, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, etcdv1alpha1.ReasonSharedClientCA)
	cond := meta.FindStatusCondition(second.Status.Conditions, etcdv1alpha1.ConditionCertificatesReady)
	if want := "spec.security.tls.clientTrustedCASecret: Secret ca holds a CA another cluster trusts for its clients (EtcdCluster " + first.Namespace + "/db"; !strings.Contains(cond.Message, want) {
		t.Errorf("CertificatesReady says %q, want %q", cond.Message, want)
	}
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(second.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("%d Pods created for a cluster sharing its client CA", len(pods.Items))
	}
	awaitCondition(ctx, t, first, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, etcdv1alpha1.ReasonCertificatesReady)

	// A client CA of its own: the second cluster goes on.
	ownCA, ownKey := testPair(t)
	for name, data := range map[string]map[string][]byte{"ca": {"ca.crt": ownCA}, "server": {"tls.crt": ownCA, "tls.key": ownKey}, "client": {"tls.crt": ownCA, "tls.key": ownKey}} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: second.Namespace, Name: name}, Data: data}
		if err := k8sClient.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	awaitCondition(ctx, t, second, etcdv1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, etcdv1alpha1.ReasonCertificatesReady)
}

// TestRefusedIssuerIsShown has the API server refuse the cluster's
// cert-manager Issuers (as a webhook or a quota would): CertificatesReady
// is False with reason ObjectRefused and the API server's message, a
// Warning event says the same, and the operator looks again soon; once
// the API server accepts them, the refusal clears.
func TestRefusedIssuerIsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "managed", UID: "managed-uid", Generation: 1},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}},
	}
	refusing := true
	refuseIssuers := func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		if u, ok := obj.(interface {
			GetKind() string
			GetName() string
		}); ok && refusing && u.GetKind() == "Issuer" {
			return apierrors.NewForbidden(cmapi.Resource("issuers"), u.GetName(), errors.New("admission webhook \"policy.example.com\" denied the request: no self-signed issuers"))
		}
		return c.Apply(ctx, obj, opts...)
	}
	cl := fakeclient.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(cluster).WithStatusSubresource(cluster).
		WithInterceptorFuncs(interceptor.Funcs{Apply: refuseIssuers}).Build()
	recorder := &events.FakeRecorder{Events: make(chan string, 10)}
	r := &PKIReconciler{Client: cl, Recorder: recorder, CertManager: true}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cluster)}

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if res.RequeueAfter != refusedRequeue {
		t.Errorf("looks again after %s, want %s", res.RequeueAfter, refusedRequeue)
	}
	cond := certificatesReady(ctx, t, cl, cluster)
	if cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1alpha1.ReasonObjectRefused || !strings.Contains(cond.Message, "the API server refused Issuer") || !strings.Contains(cond.Message, "no self-signed issuers") {
		t.Errorf("CertificatesReady = %s %s %q, want False %s with the API server's message", cond.Status, cond.Reason, cond.Message, etcdv1alpha1.ReasonObjectRefused)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning "+etcdv1alpha1.ReasonObjectRefused) || !strings.Contains(e, "no self-signed issuers") {
			t.Errorf("event %q, want a Warning %s with the API server's message", e, etcdv1alpha1.ReasonObjectRefused)
		}
	default:
		t.Errorf("no event")
	}

	refusing = false
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if cond := certificatesReady(ctx, t, cl, cluster); cond.Reason == etcdv1alpha1.ReasonObjectRefused {
		t.Errorf("CertificatesReady still %s %q once the Issuers are accepted", cond.Reason, cond.Message)
	}
}

func certificatesReady(ctx context.Context, t *testing.T, cl client.Client, cluster *etcdv1alpha1.EtcdCluster) metav1.Condition {
	t.Helper()
	got := &etcdv1alpha1.EtcdCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionCertificatesReady)
	if cond == nil {
		t.Fatalf("no CertificatesReady in %v", got.Status.Conditions)
	}
	return *cond
}

// TestPKISeesTheClusterForm: the PKI reconciler, which turns
// authentication on once the cluster has formed, is told when
// status.clusterID changes, and by no other status update.
func TestPKISeesTheClusterForm(t *testing.T) {
	was := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 1}}
	formed := was.DeepCopy()
	formed.Status.ClusterID = "9"
	other := was.DeepCopy()
	other.Status.ReadyReplicas = 1
	if !clusterIDChanged.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: formed}) {
		t.Error("the cluster formed: not passed")
	}
	if clusterIDChanged.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: other}) {
		t.Error("another status change: passed")
	}
}
