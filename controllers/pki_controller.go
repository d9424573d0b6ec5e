package controllers

import (
	"context"
	"slices"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/pki"
)

// PKIFieldManager is the field manager of the PKI reconciler: the
// cert-manager objects it applies and the CertificatesReady condition.
const PKIFieldManager = "etcd-operator-pki"

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
	// SecretNames, when set, is the cache of Secret names whose changes
	// wake the clusters that name a user's Secret (NewSecretNamesCache).
	SecretNames cache.Cache
}

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates;issuers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdtenants,verbs=get;list;watch

// Reconcile issues (managed mode) and checks the certificates of one
// cluster, the topology reconciler's way: observe, plan
// (pki.PlanCertificates, pure), act; then it turns etcd's authentication
// on or off (off only once no EtcdTenant names the cluster). Failures
// return an error; RequeueAfter is only for known waits.
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
		o, err := r.observe(ctx, c)
		if err != nil {
			return ctrl.Result{}, err
		}
		p := pki.PlanCertificates(o)
		if err := r.act(ctx, c, p); err != nil {
			// The API server refused an Issuer, Certificate or Secret, or
			// one of the cluster's names is someone else's (never taken
			// over): said in CertificatesReady and an event.
			refusal, ok := refusalOf(action{}, err)
			if !ok {
				return ctrl.Result{}, err
			}
			p.CertificatesReady = refusedCondition(p.CertificatesReady, refusal)
			p.Recheck = refusedRequeue
			r.event(c, corev1.EventTypeWarning, refusal.refusal, "%s", refusal.reason)
		}
		conds = append(conds, p.CertificatesReady, p.CATrusted)
		wait, certsReady = p.Recheck, p.CertificatesReady.Status == metav1.ConditionTrue
	}
	// Authentication (auth.go) is a step of this pass, not a reconciler of
	// its own: it waits for the certificates this pass has just checked.
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

// refusedCondition is cond turned False by a refusal: its reason and
// message are the refusal's.
func refusedCondition(cond metav1.Condition, refusal action) metav1.Condition {
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, refusal.refusal, refusal.reason
	return cond
}

// observe reads what pki.PlanCertificates decides from: every Secret of
// the cluster's PKI, its Certificates and its tenants' certificate
// Secrets (operator-managed mode) and the trust bundle hash each member
// Pod started with.
func (r *PKIReconciler) observe(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (pki.Observed, error) {
	o := pki.Observed{Cluster: c, CertManager: r.CertManager, Secrets: map[string]*corev1.Secret{}, Certificates: map[string]*cmapi.Certificate{}, Now: time.Now()}
	secrets := r.Client
	for _, name := range pki.SecretsOf(c) {
		s := &corev1.Secret{}
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return o, err
		}
		o.Secrets[name] = s
	}
	if c.Spec.Security.ManagedTLS() {
		tenants := &corev1.SecretList{}
		if err := r.List(ctx, tenants, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: c.Name}, client.HasLabels{etcdv1alpha1.LabelTenant}); err != nil {
			return o, err
		}
		for i := range tenants.Items {
			o.TenantSecrets = append(o.TenantSecrets, &tenants.Items[i])
		}
	}
	if c.Spec.Security.ManagedTLS() && r.CertManager {
		for _, want := range pki.Certificates(c) {
			got := &cmapi.Certificate{}
			if err := r.Get(ctx, client.ObjectKeyFromObject(want), got); apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return o, err
			}
			o.Certificates[got.Name] = got
		}
	}
	others, err := r.otherClusters(ctx, c)
	if err != nil {
		return o, err
	}
	o.OtherClusters = others
	pods, err := memberPods(ctx, r.Client, c)
	if err != nil {
		return o, err
	}
	for _, p := range pods {
		o.MemberTrustHashes = append(o.MemberTrustHashes, p.Annotations[etcdv1alpha1.AnnotationTrustBundleHash])
	}
	return o, nil
}

// otherClusters are the other EtcdClusters the operator sees, in every
// namespace, with the client CAs their trust bundles hold, for a cluster
// with user-provided Secrets and a client CA (pki.SharedClientCA); none
// for the others.
func (r *PKIReconciler) otherClusters(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]pki.OtherCluster, error) {
	if !usesOwnClientCA(c) {
		return nil, nil
	}
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := r.List(ctx, clusters); err != nil {
		return nil, err
	}
	var others []pki.OtherCluster
	for i := range clusters.Items {
		o := &clusters.Items[i]
		if o.UID == c.UID || !o.Spec.Security.ClientTLS() {
			continue
		}
		bundle := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: builder.TrustBundleSecretName(o)}, bundle); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		others = append(others, pki.OtherCluster{Namespace: o.Namespace, Name: o.Name, Created: o.CreationTimestamp.Time, ClientCAs: bundle.Data[builder.BundleClientCAKey]})
	}
	return others, nil
}

// usesOwnClientCA tells whether cluster c trusts a client CA from a
// user's Secret, which another cluster might trust too.
func usesOwnClientCA(c *etcdv1alpha1.EtcdCluster) bool {
	sec := c.Spec.Security
	return !sec.ManagedTLS() && sec != nil && sec.TLS != nil && sec.TLS.ClientTrustedCASecret != ""
}

// act applies the plan's objects, raising the event of each once it is
// applied, then the plan's other events.
func (r *PKIReconciler) act(ctx context.Context, c *etcdv1alpha1.EtcdCluster, p pki.Plan) error {
	for _, w := range p.Writes {
		if err := applyObject(ctx, r.Client, w.Object, PKIFieldManager); err != nil {
			return err
		}
		if w.Event != nil {
			r.event(c, w.Event.Type, w.Event.Reason, "%s", w.Event.Message)
		}
	}
	for _, e := range p.Events {
		r.event(c, e.Type, e.Reason, "%s", e.Message)
	}
	return nil
}

func (r *PKIReconciler) event(c *etcdv1alpha1.EtcdCluster, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, eventType, reason, "Certificates", format, args...)
	}
}

// clustersUsingSecret maps a Secret to the clusters of its namespace whose
// TLS uses it, which it is the trust bundle or a signing copy of, or whose
// tenant's certificate it holds; and a cluster's trust bundle to every
// cluster with a client CA of the user's, which must not share it.
func (r *PKIReconciler) clustersUsingSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := r.List(ctx, clusters); err != nil {
		return nil
	}
	labels := obj.GetLabels()
	owner := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: labels[etcdv1alpha1.LabelCluster]}}
	bundle := owner.Name != "" && obj.GetName() == builder.TrustBundleSecretName(owner)
	var reqs []reconcile.Request
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if c.Namespace != obj.GetNamespace() {
			if bundle && usesOwnClientCA(c) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
			}
			continue
		}
		tenant := labels[etcdv1alpha1.LabelTenant] != "" && labels[etcdv1alpha1.LabelCluster] == c.Name
		if tenant || bundle && usesOwnClientCA(c) || slices.Contains(pki.SecretsOf(c), obj.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// clusterOfTenant maps an EtcdTenant to the cluster it names.
func clusterOfTenant(_ context.Context, obj client.Object) []reconcile.Request {
	t, ok := obj.(*etcdv1alpha1.EtcdTenant)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: t.Namespace, Name: t.Spec.ClusterName}}}
}

// tenantComesOrGoes lets through the tenant events authentication
// depends on: a tenant created keeps it on, the last one gone lets it go
// off. Status updates are not among them.
var tenantComesOrGoes = predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}

// clusterIDChanged passes the updates of an EtcdCluster that change its
// status.clusterID: authentication is turned on once the cluster has
// formed, and a thousand clusters that have not would otherwise each be
// looked at every few seconds to see whether they have.
var clusterIDChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	was, ok := e.ObjectOld.(*etcdv1alpha1.EtcdCluster)
	now, ok2 := e.ObjectNew.(*etcdv1alpha1.EtcdCluster)
	return ok && ok2 && was.Status.ClusterID != now.Status.ClusterID
}}

// SetupWithManager registers the reconciler with mgr. The Certificates it
// owns are watched only when cert-manager's API is served.
func (r *PKIReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdCluster{}, ctrlbuilder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, clusterIDChanged))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingSecret)).
		// A member Pod created or deleted may be the last one to trust a
		// new CA, which may then sign.
		Owns(&corev1.Pod{}, ctrlbuilder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// Authentication stays on while tenants name the cluster.
		Watches(&etcdv1alpha1.EtcdTenant{}, handler.EnqueueRequestsFromMapFunc(clusterOfTenant), ctrlbuilder.WithPredicates(tenantComesOrGoes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: clusterWorkers}).
		Named("etcdcluster-pki")
	if r.CertManager {
		b = b.Owns(&cmapi.Certificate{})
	}
	if r.SecretNames != nil {
		b = b.WatchesRawSource(source.Kind(r.SecretNames, secretMetadata(), handler.TypedEnqueueRequestsFromMapFunc(r.clustersNamingSecret)))
	}
	return b.Complete(r)
}

// clustersNamingSecret maps a Secret to the clusters of its namespace
// whose spec names it: the user's Secrets, which the manager's cache does
// not hold, so the watch of Secrets above never sees them.
func (r *PKIReconciler) clustersNamingSecret(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := r.List(ctx, clusters, client.InNamespace(obj.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if c.Spec.Security.ManagedTLS() {
			continue
		}
		if slices.ContainsFunc(pki.Needs(builder.CertificateSourcesOf(c)), func(n pki.Need) bool { return n.Secret == obj.Name }) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// CertManagerInstalled tells whether the API server serves cert-manager's
// Certificates.
func CertManagerInstalled(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(cmapi.SchemeGroupVersion.WithKind("Certificate").GroupKind(), cmapi.SchemeGroupVersion.Version)
	return err == nil
}
