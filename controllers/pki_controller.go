package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/pki"
)

// PKIFieldManager is the field manager of the PKI reconciler: the
// cert-manager objects it applies and the CertificatesReady condition.
const PKIFieldManager = "etcd-operator-pki"

// Waits of the PKI reconciler. Certificates and Secrets are watched; these
// only bound how stale the condition can get.
const (
	certManagerMissingRequeue = time.Minute
	certificatesRecheck       = time.Hour
)

// PKIReconciler owns the certificates of clusters with TLS: in
// operator-managed mode it applies the cert-manager Issuers and
// Certificates that issue them; in both modes it checks the Secrets the
// members and the operator use and reports the CertificatesReady
// condition, with the nearest expiry. It gathers the CAs members and
// clients trust into the trust bundle Secret and, for the CAs it creates,
// keeps the copy their Issuer signs with (see internal/pki/trust.go); the
// user's Secrets are read only, the certificates are cert-manager's to
// write.
type PKIReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// CertManager tells whether the cert-manager API is served; without it
	// operator-managed clusters are reported waiting for it.
	CertManager bool
	// NewEtcdClient connects to a cluster's members, to turn etcd's
	// authentication on or off.
	NewEtcdClient EtcdClientFactory
}

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates;issuers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reconcile issues (managed mode) and checks the certificates of one
// cluster. Failures return an error; RequeueAfter is only for known waits.
func (r *PKIReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "pki", err) }()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// wait is how soon to look again; 0 when nothing needs a look.
	var conds []metav1.Condition
	var wait time.Duration
	certsReady := true
	if c.Spec.Security.TLSEnabled() {
		cond, trusted, recheck, err := r.certificates(ctx, c, time.Now())
		if err != nil {
			return ctrl.Result{}, err
		}
		if old := meta.FindStatusCondition(c.Status.Conditions, cond.Type); cond.Status == metav1.ConditionFalse && (old == nil || old.Message != cond.Message) {
			r.event(c, corev1.EventTypeWarning, cond.Reason, "%s", cond.Message)
		}
		conds, wait, certsReady = append(conds, cond, trusted), recheck, cond.Status == metav1.ConditionTrue
	}
	if certsReady && r.NewEtcdClient != nil {
		auth, recheck, err := r.authentication(ctx, c)
		if err != nil {
			return ctrl.Result{}, err
		}
		conds = append(conds, auth)
		if recheck > 0 && (wait == 0 || recheck < wait) {
			wait = recheck
		}
	}
	if err := applyStatus(ctx, r.Client, c, PKIFieldManager, statusPatch{conditions: conds}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// certificates is the step list of a pass: apply the cert-manager objects
// (managed mode), gather the trust bundle and let the operator's CAs sign
// once members trust them, wait for cert-manager to issue, check the
// Secrets. It returns the CertificatesReady and CATrusted conditions.
func (r *PKIReconciler) certificates(ctx context.Context, c *etcdv1alpha1.EtcdCluster, now time.Time) (certs, trusted metav1.Condition, recheck time.Duration, err error) {
	if c.Spec.Security.ManagedTLS() {
		if !r.CertManager {
			why := "The cert-manager API (cert-manager.io/v1) is not installed: install cert-manager, then restart the operator"
			return pki.Condition(c, pki.ReasonCertManagerMissing, []string{why}, time.Time{}, now), pki.TrustUnknown(c, why), certManagerMissingRequeue, nil
		}
		if err := r.applyCertManagerObjects(ctx, c); err != nil {
			return certs, trusted, 0, err
		}
	}
	// Before waiting for cert-manager: the signing copies are what the
	// operator's CA Issuers sign with.
	if trusted, err = r.trust(ctx, c, now); err != nil {
		var bad *pki.SecretError
		if !errors.As(err, &bad) {
			return certs, trusted, 0, err
		}
		return pki.Condition(c, pki.ReasonSecretInvalid, []string{bad.Error()}, time.Time{}, now), pki.TrustUnknown(c, bad.Error()), 0, nil
	}
	if c.Spec.Security.ManagedTLS() {
		issuing, err := r.issuing(ctx, c)
		if err != nil || len(issuing) > 0 {
			return pki.Condition(c, pki.ReasonIssuing, issuing, time.Time{}, now), trusted, 0, err
		}
	}
	var problems []string
	var nearest time.Time
	for _, n := range pki.Needs(builder.CertificateSourcesOf(c)) {
		s := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: n.Secret}, s); err != nil {
			if !apierrors.IsNotFound(err) {
				return certs, trusted, 0, err
			}
			s = nil
		}
		expiry, err := pki.Check(n, s)
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
		return pki.Condition(c, pki.ReasonSecretInvalid, problems, time.Time{}, now), trusted, 0, nil
	}
	// Look again when the nearest certificate expires, to report it.
	return pki.Condition(c, "", nil, nearest, now), trusted, min(nearest.Sub(now)+time.Second, certificatesRecheck), nil
}

// trust gathers the cluster's trust bundle from the certificate Secrets
// and the previous bundle, applies it when it changed, and refreshes the
// signing copy of each of the operator's CAs that every member Pod now
// trusts. Its error is a *pki.SecretError for a certificate Secret that
// cannot be read as one, or a failure to talk to the API server.
func (r *PKIReconciler) trust(ctx context.Context, c *etcdv1alpha1.EtcdCluster, now time.Time) (metav1.Condition, error) {
	secrets := secretReader{r: r.Client, ns: c.Namespace, read: map[string]*corev1.Secret{}}
	data, err := r.gatherTrust(ctx, c, secrets, now)
	if err != nil {
		return metav1.Condition{}, err
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabelsSelector{Selector: MemberSelector(c)}); err != nil {
		return metav1.Condition{}, err
	}
	trusting := pki.TrustingPods(pods.Items, builder.TrustBundleHash(data))
	var held []string
	if c.Spec.Security.ManagedTLS() {
		if held, err = r.releaseSigning(ctx, c, secrets, data, trusting == len(pods.Items)); err != nil {
			return metav1.Condition{}, err
		}
	}
	return pki.TrustCondition(c, data, trusting, len(pods.Items), held), nil
}

// gatherTrust builds the trust bundle from its sources and the previous
// bundle, and applies it when it changed.
func (r *PKIReconciler) gatherTrust(ctx context.Context, c *etcdv1alpha1.EtcdCluster, secrets secretReader, now time.Time) (map[string][]byte, error) {
	sources := pki.TrustSources(c)
	pemOf := map[builder.SecretKey][]byte{}
	for _, keys := range sources {
		for _, k := range keys {
			s, err := secrets.get(ctx, k.Secret)
			if err != nil {
				return nil, err
			}
			if s != nil {
				pemOf[k] = s.Data[k.Key]
			}
		}
	}
	previous, err := secrets.get(ctx, builder.TrustBundleSecretName(c))
	if err != nil {
		return nil, err
	}
	var prevData map[string][]byte
	if previous != nil {
		prevData = previous.Data
	}
	data, err := pki.Trust(sources, func(k builder.SecretKey) []byte { return pemOf[k] }, prevData, now)
	if err != nil {
		return nil, err
	}
	if previous == nil || !maps.EqualFunc(data, previous.Data, bytes.Equal) {
		if err := applyObject(ctx, r.Client, pki.TrustBundleSecret(c, data), PKIFieldManager); err != nil {
			return nil, err
		}
		r.event(c, corev1.EventTypeNormal, "TrustBundleUpdated", "Secret %s now holds %s", builder.TrustBundleSecretName(c), pki.DescribeTrust(data))
	}
	return data, nil
}

// releaseSigning refreshes the signing copy of each of the operator's CAs
// whose certificate the bundle holds, once every member Pod trusts the
// bundle; it returns the CAs held back. A missing copy is made at once:
// it is the CA a new cluster starts with, or, on a cluster created by an
// operator without the copies, the CA its Issuer signed with until now.
func (r *PKIReconciler) releaseSigning(ctx context.Context, c *etcdv1alpha1.EtcdCluster, secrets secretReader, bundle map[string][]byte, allTrust bool) ([]string, error) {
	var held []string
	for _, name := range pki.OwnCAs(c) {
		ca, err := secrets.get(ctx, name)
		if err != nil {
			return nil, err
		}
		if ca == nil {
			continue // cert-manager has not issued it yet
		}
		signing, err := secrets.get(ctx, pki.SigningSecretName(name))
		if err != nil {
			return nil, err
		}
		if signing != nil && bytes.Equal(signing.Data[builder.CertKey], ca.Data[builder.CertKey]) {
			continue
		}
		if signing != nil && (!allTrust || !pki.Trusts(c, bundle, name, ca.Data[builder.CertKey])) {
			held = append(held, name)
			continue
		}
		if err := applyObject(ctx, r.Client, pki.SigningSecret(c, ca), PKIFieldManager); err != nil {
			return nil, err
		}
		if signing != nil {
			r.event(c, corev1.EventTypeNormal, "CARolledOut", "Every member trusts the new %s: it signs from now on", name)
		}
	}
	return held, nil
}

// secretReader reads Secrets of one namespace once per pass; a Secret
// that does not exist reads as nil.
type secretReader struct {
	r    client.Reader
	ns   string
	read map[string]*corev1.Secret
}

func (s secretReader) get(ctx context.Context, name string) (*corev1.Secret, error) {
	if got, ok := s.read[name]; ok {
		return got, nil
	}
	got := &corev1.Secret{}
	if err := s.r.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, got); apierrors.IsNotFound(err) {
		got = nil
	} else if err != nil {
		return nil, err
	}
	s.read[name] = got
	return got, nil
}

// applyCertManagerObjects server-side applies the cluster's Issuers and
// Certificates.
func (r *PKIReconciler) applyCertManagerObjects(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	var objs []client.Object
	for _, i := range pki.Issuers(c) {
		objs = append(objs, i)
	}
	for _, cert := range pki.Certificates(c) {
		objs = append(objs, cert)
	}
	for _, obj := range objs {
		if err := applyObject(ctx, r.Client, obj, PKIFieldManager); err != nil {
			return err
		}
	}
	return nil
}

// applyObject server-side applies the metadata and spec of obj as
// fieldManager.
func applyObject(ctx context.Context, c client.Client, obj client.Object, fieldManager string) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	uo := &unstructured.Unstructured{Object: u}
	uo.SetGroupVersionKind(gvk)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(uo), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}

// issuing names the cluster's Certificates that cert-manager has not
// issued (Ready) yet, and why.
func (r *PKIReconciler) issuing(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]string, error) {
	var waiting []string
	for _, want := range pki.Certificates(c) {
		got := &cmapi.Certificate{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			return nil, err
		}
		if why := notIssued(got); why != "" {
			waiting = append(waiting, why)
		}
	}
	return waiting, nil
}

// notIssued says why cert-manager has not issued a Certificate for its
// current spec yet; "" once it has.
func notIssued(cert *cmapi.Certificate) string {
	why := "cert-manager has not looked at it yet"
	for _, cond := range cert.Status.Conditions {
		if cond.Type != cmapi.CertificateConditionReady {
			continue
		}
		if cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == cert.Generation {
			return ""
		}
		why = cond.Reason + ": " + cond.Message
	}
	return fmt.Sprintf("Certificate %s is not issued yet (%s)", cert.Name, why)
}

// certificatesWait turns the creation of a member Pod into a wait while the
// cluster's certificates are not ready (as the PKI reconciler reports in
// CertificatesReady) or its trust bundle does not exist: the Pod could not
// start without its Secrets, and a Pod waiting on a missing Secret says
// nothing in the cluster's status.
func certificatesWait(o observed, a action) action {
	c := o.cluster
	if (a.kind != actCreateSeed && a.kind != actCreatePod) || !c.Spec.Security.TLSEnabled() {
		return a
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionCertificatesReady)
	if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == c.Generation && o.trustHash != "" {
		return a
	}
	why := "the PKI reconciler has not checked them yet"
	switch {
	case cond != nil && cond.Status == metav1.ConditionFalse:
		why = cond.Message
	case cond != nil && cond.Status == metav1.ConditionTrue:
		why = "the trust bundle Secret " + builder.TrustBundleSecretName(c) + " does not exist yet"
	}
	return action{kind: actWait, member: a.member, reason: "waiting for the certificates before creating the member's Pod: " + why}
}

func (r *PKIReconciler) event(c *etcdv1alpha1.EtcdCluster, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, eventType, reason, "Certificates", format, args...)
	}
}

// clustersUsingSecret maps a Secret to the clusters of its namespace whose
// TLS uses it, or which it is the trust bundle or a signing copy of.
func (r *PKIReconciler) clustersUsingSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := r.List(ctx, clusters, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if slices.Contains(pki.SecretsOf(c), obj.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// SetupWithManager registers the reconciler with mgr. The Certificates it
// owns are watched only when cert-manager's API is served.
func (r *PKIReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdCluster{}, ctrlbuilder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingSecret)).
		// A member Pod created or deleted may be the last one to trust a
		// new CA, which may then sign.
		Owns(&corev1.Pod{}, ctrlbuilder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: clusterWorkers}).
		Named("etcdcluster-pki")
	if r.CertManager {
		b = b.Owns(&cmapi.Certificate{})
	}
	return b.Complete(r)
}

// CertManagerInstalled tells whether the API server serves cert-manager's
// Certificates.
func CertManagerInstalled(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(cmapi.SchemeGroupVersion.WithKind("Certificate").GroupKind(), cmapi.SchemeGroupVersion.Version)
	return err == nil
}
