package controllers

import (
	"context"
	"fmt"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/pki"
)

// TenantFieldManager is the field manager of the tenant reconciler's
// server-side applies (the tenants' Certificates).
const TenantFieldManager = "etcd-operator-tenant"

// tenantResync bounds how stale a ready tenant's user, role and Secret can
// get (someone changing them in etcd by hand, a renewed CA).
const tenantResync = 5 * time.Minute

// TenantReconciler gives each EtcdTenant its share of an EtcdCluster: an
// etcd role with read-write permission on exactly its prefix, a user
// holding it, credentials (a client certificate through cert-manager with
// the user as CN, and/or a password), and a connection Secret. A refused
// tenant (tenantBlocker, authBlocker) holds no user or role. Deleting a
// tenant revokes the user and role and keeps or deletes its keys. While
// tenants name a cluster, the PKI reconciler keeps its etcd
// authentication on (planAuth).
type TenantReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// CertManager tells whether the cert-manager API is served.
	CertManager bool
	// NewEtcdClient connects to a cluster's members as root.
	NewEtcdClient EtcdClientFactory
}

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdtenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdtenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdtenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// Reconcile sets up one tenant, or tears it down when it is deleted.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "tenant", err) }()
	t := &etcdv1alpha1.EtcdTenant{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Spec.ClusterName}, c); apierrors.IsNotFound(err) {
		c = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, t, c)
	}
	if controllerutil.AddFinalizer(t, etcdv1alpha1.FinalizerTenant) {
		if err := r.Update(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	cond, wait, err := r.setUp(ctx, t, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if old := meta.FindStatusCondition(t.Status.Conditions, cond.Type); old == nil || old.Reason != cond.Reason {
		eventType := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.event(t, eventType, cond.Reason, "%s", cond.Message)
	}
	return ctrl.Result{RequeueAfter: wait}, r.writeStatus(ctx, t, cond)
}

// setUp is the step list of a pass: check what stands in the way (and
// revoke a refused tenant), issue the credentials, make etcd hold the user
// and role, write the connection Secret. It returns the Ready condition
// and how soon to look again.
func (r *TenantReconciler) setUp(ctx context.Context, t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster) (metav1.Condition, time.Duration, error) {
	others := &etcdv1alpha1.EtcdTenantList{}
	if err := r.List(ctx, others, client.InNamespace(t.Namespace)); err != nil {
		return metav1.Condition{}, 0, err
	}
	reason, msg := tenantBlocker(t, c, others.Items)
	if reason == etcdv1alpha1.ReasonClusterNotFound {
		return tenantReady(t, metav1.ConditionFalse, reason, msg), 0, nil // no etcd left to hold anything
	}
	ec, err := connectMembers(ctx, r.Client, r.NewEtcdClient, c)
	if err != nil {
		return tenantUnreachable(t, c, reason, msg, err)
	}
	defer func() { _ = ec.Close() }()
	authOn, err := ec.AuthEnabled(ctx)
	if err != nil {
		return tenantUnreachable(t, c, reason, msg, err)
	}
	if reason == "" {
		reason, msg = authBlocker(c, authOn)
	}
	if reason != "" {
		// A refused tenant holds no access: whatever user and role an
		// earlier pass gave it go, on every pass, before the refusal is
		// reported.
		if err := ec.RemoveTenant(ctx, t.UserName()); err != nil {
			return tenantUnreachable(t, c, reason, msg, err)
		}
		return tenantReady(t, metav1.ConditionFalse, reason, msg+"; until then the tenant has no etcd user or role"), 0, nil
	}
	var cert *corev1.Secret
	if c.Spec.Security.ManagedTLS() {
		if !r.CertManager {
			return tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonIssuing, "The cert-manager API (cert-manager.io/v1) is not installed: install cert-manager, then restart the operator"), 0, nil
		}
		var waiting string
		var err error
		var foreign string
		if cert, waiting, foreign, err = r.certificate(ctx, t, c); foreign != "" {
			// That Secret is not in the operator's cache: its deletion
			// wakes nothing, so look again.
			return tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonForeignObject, foreign), pki.ForeignSecretRecheck, nil
		} else if err != nil || waiting != "" {
			return tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonIssuing, waiting), 0, err
		}
	}
	var ca *corev1.Secret
	if src := builder.TLSSourcesOf(c).ServerCA; src.IsSet() {
		ca = &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: src.Secret}, ca); err != nil {
			return metav1.Condition{}, 0, fmt.Errorf("reading the cluster's CA Secret %s: %w", src.Secret, err)
		}
	}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.ConnectionSecretName()}, secret); apierrors.IsNotFound(err) {
		secret = nil
	} else if err != nil {
		return metav1.Condition{}, 0, err
	}
	password := ""
	if tenantPasswordMode(t, c) {
		if secret != nil {
			password = string(secret.Data[corev1.BasicAuthPasswordKey])
		}
		if password == "" {
			var err error
			if password, err = newPassword(); err != nil {
				return metav1.Condition{}, 0, err
			}
		}
	}
	// The Secret first: a password etcd holds is always one the Secret
	// holds, whenever the operator is interrupted.
	if err := r.writeSecret(ctx, t, secret, connectionData(t, c, ca, cert, password)); err != nil {
		return metav1.Condition{}, 0, err
	}
	if err := ec.EnsureTenant(ctx, etcd.Tenant{User: t.UserName(), Prefix: t.EffectivePrefix(), Password: password}); err != nil {
		return tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonEtcdUnreachable, fmt.Sprintf("Creating the tenant's user and role on EtcdCluster %s: %v", c.Name, err)), authRecheck, nil
	}
	how := "a client certificate with CN " + t.UserName()
	switch {
	case password != "" && cert != nil:
		how += " or its password"
	case password != "":
		how = "user " + t.UserName() + " and its password"
	}
	return tenantReady(t, metav1.ConditionTrue, etcdv1alpha1.ReasonTenantReady, fmt.Sprintf("Secret %s connects to EtcdCluster %s with %s; read and write are allowed under %s only", t.ConnectionSecretName(), c.Name, how, t.EffectivePrefix())), tenantResync, nil
}

// tenantUnreachable is the Ready condition of a pass that could not reach
// cluster c's etcd: the refusal (reason, msg) when there is one, saying
// that the tenant's user and role could not be revoked yet, else
// EtcdUnreachable. Both are looked at again soon.
func tenantUnreachable(t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster, reason, msg string, err error) (metav1.Condition, time.Duration, error) {
	if reason != "" {
		return tenantReady(t, metav1.ConditionFalse, reason, fmt.Sprintf("%s; the tenant's etcd user and role, if any, could not be revoked yet (retried): %v", msg, err)), authRecheck, nil
	}
	return tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonEtcdUnreachable, fmt.Sprintf("Cannot reach EtcdCluster %s to create the tenant's user and role: %v", c.Name, err)), authRecheck, nil
}

// certificate applies the tenant's Certificate and returns its Secret once
// cert-manager has issued it, or what it waits for, or why a Secret of its
// name belongs to someone else (then no Certificate is applied:
// cert-manager would overwrite that Secret).
func (r *TenantReconciler) certificate(ctx context.Context, t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster) (secret *corev1.Secret, waiting, foreign string, err error) {
	want := pki.TenantCertificate(c, t)
	existing := &corev1.Secret{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: want.Spec.SecretName}, existing); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, "", "", err
	default:
		if why := pki.ForeignTenantSecret(c, t, existing); why != "" {
			return nil, "", why, nil
		}
	}
	if err := applyObject(ctx, r.Client, want, TenantFieldManager); err != nil {
		return nil, "", "", err
	}
	got := &cmapi.Certificate{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return nil, "", "", err
	}
	if why := pki.NotIssued(got); why != "" {
		return nil, why, "", nil
	}
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: want.Spec.SecretName}, s); err != nil {
		return nil, "", "", err
	}
	return s, "", "", nil
}

// writeSecret creates the connection Secret, or updates it when its
// content differs. The tenant owns it.
func (r *TenantReconciler) writeSecret(ctx context.Context, t *etcdv1alpha1.EtcdTenant, current *corev1.Secret, data map[string][]byte) error {
	if current == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:            t.ConnectionSecretName(),
				Namespace:       t.Namespace,
				Labels:          map[string]string{etcdv1alpha1.LabelCluster: t.Spec.ClusterName, etcdv1alpha1.LabelTenant: t.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(t, etcdv1alpha1.GroupVersion.WithKind("EtcdTenant"))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		return r.Create(ctx, s)
	}
	if !metav1.IsControlledBy(current, t) {
		return fmt.Errorf("secret %s exists and does not belong to EtcdTenant %s: the operator never overwrites it; delete or rename it", current.Name, t.Name)
	}
	if equality.Semantic.DeepEqual(current.Data, data) {
		return nil
	}
	current.Data = data
	return r.Update(ctx, current)
}

// finalize revokes a deleted tenant's user and role and keeps or deletes
// its keys as its retention policy says, then lets it go. Without its
// cluster there is nothing left to revoke.
func (r *TenantReconciler) finalize(ctx context.Context, t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster) error {
	if !controllerutil.ContainsFinalizer(t, etcdv1alpha1.FinalizerTenant) {
		return nil
	}
	if c != nil && c.DeletionTimestamp.IsZero() {
		done, err := r.revoke(ctx, t, c)
		if err != nil {
			cond := tenantReady(t, metav1.ConditionFalse, etcdv1alpha1.ReasonRevokeFailed, fmt.Sprintf("Cannot revoke the tenant on EtcdCluster %s yet: %v", c.Name, err))
			if serr := r.writeStatus(ctx, t, cond); serr != nil {
				return serr
			}
			return err
		}
		r.event(t, corev1.EventTypeNormal, "Revoked", "%s", done)
	}
	controllerutil.RemoveFinalizer(t, etcdv1alpha1.FinalizerTenant)
	return r.Update(ctx, t)
}

// revoke deletes the tenant's user and role and, with retentionPolicy
// Delete, its keys, unless another tenant's prefix overlaps (then the
// keys are not only this tenant's). It says what it did.
func (r *TenantReconciler) revoke(ctx context.Context, t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster) (string, error) {
	ec, err := connectMembers(ctx, r.Client, r.NewEtcdClient, c)
	if err != nil {
		return "", err
	}
	defer func() { _ = ec.Close() }()
	if err := ec.RemoveTenant(ctx, t.UserName()); err != nil {
		return "", err
	}
	done := fmt.Sprintf("Deleted etcd user and role %s", t.UserName())
	if t.Spec.RetentionPolicy != etcdv1alpha1.RetentionDelete {
		return done + fmt.Sprintf("; kept the keys under %s (retentionPolicy Keep)", t.EffectivePrefix()), nil
	}
	others := &etcdv1alpha1.EtcdTenantList{}
	if err := r.List(ctx, others, client.InNamespace(t.Namespace)); err != nil {
		return "", err
	}
	for _, o := range others.Items {
		if o.Name != t.Name && o.Spec.ClusterName == t.Spec.ClusterName && etcdv1alpha1.PrefixesOverlap(o.EffectivePrefix(), t.EffectivePrefix()) {
			return done + fmt.Sprintf("; kept the keys under %s although retentionPolicy is Delete: EtcdTenant %s's prefix %s overlaps it", t.EffectivePrefix(), o.Name, o.EffectivePrefix()), nil
		}
	}
	n, err := ec.DeletePrefix(ctx, t.EffectivePrefix())
	if err != nil {
		return "", err
	}
	return done + fmt.Sprintf("; deleted the %d keys under %s (retentionPolicy Delete)", n, t.EffectivePrefix()), nil
}

// writeStatus writes the tenant's status when it changed.
func (r *TenantReconciler) writeStatus(ctx context.Context, t *etcdv1alpha1.EtcdTenant, ready metav1.Condition) error {
	want := t.Status.DeepCopy()
	want.ObservedGeneration = t.Generation
	meta.SetStatusCondition(&want.Conditions, ready)
	want.Prefix, want.User = t.EffectivePrefix(), t.UserName()
	if ready.Status == metav1.ConditionTrue {
		want.SecretName = t.ConnectionSecretName()
	}
	if equality.Semantic.DeepEqual(*want, t.Status) {
		return nil
	}
	t.Status = *want
	return r.Status().Update(ctx, t)
}

func (r *TenantReconciler) event(t *etcdv1alpha1.EtcdTenant, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(t, nil, eventType, reason, "Tenant", format, args...)
	}
}

// tenantsOfCluster maps an EtcdCluster to the tenants it serves.
func (r *TenantReconciler) tenantsOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	tenants := &etcdv1alpha1.EtcdTenantList{}
	if err := r.List(ctx, tenants, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, t := range tenants.Items {
		if t.Spec.ClusterName == obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return reqs
}

// siblingTenants maps a tenant to the other tenants of its cluster: one
// refused for overlapping its prefix may proceed once it is gone, and one
// created in the same second as an overlapping tenant whose name sorts
// before it is refused (and revoked) once that one appears.
func (r *TenantReconciler) siblingTenants(ctx context.Context, obj client.Object) []reconcile.Request {
	t, ok := obj.(*etcdv1alpha1.EtcdTenant)
	if !ok {
		return nil
	}
	tenants := &etcdv1alpha1.EtcdTenantList{}
	if err := r.List(ctx, tenants, client.InNamespace(t.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range tenants.Items {
		if o.Name != t.Name && o.Spec.ClusterName == t.Spec.ClusterName {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&o)})
		}
	}
	return reqs
}

// tenantsOfSecret maps a tenant's certificate Secret (labelled by
// cert-manager's secretTemplate) to the tenant, and a cluster's trust
// bundle to the cluster's tenants, whose ca.crt it is.
func (r *TenantReconciler) tenantsOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	if name, ok := obj.GetLabels()[etcdv1alpha1.LabelTenant]; ok {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
	}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[etcdv1alpha1.LabelCluster]}}
	if cluster.Name != "" && obj.GetName() == builder.TrustBundleSecretName(cluster) {
		return r.tenantsOfCluster(ctx, cluster)
	}
	return nil
}

// clusterChangeForTenants lets through the cluster changes tenants
// depend on: the spec, and the Authentication condition's status and
// reason, which change when etcd's authentication goes on or off. The
// health reconciler's status updates every few seconds are not among
// them.
var clusterChangeForTenants = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	authOf := func(obj client.Object) string {
		c, ok := obj.(*etcdv1alpha1.EtcdCluster)
		if !ok {
			return ""
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAuthentication); cond != nil {
			return string(cond.Status) + "/" + cond.Reason
		}
		return ""
	}
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || authOf(e.ObjectOld) != authOf(e.ObjectNew)
}}

// SetupWithManager registers the reconciler with mgr.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdTenant{}).
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfCluster), ctrlbuilder.WithPredicates(clusterChangeForTenants)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfSecret)).
		Watches(&etcdv1alpha1.EtcdTenant{}, handler.EnqueueRequestsFromMapFunc(r.siblingTenants), ctrlbuilder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() },
		})).
		Named("etcdtenant")
	if r.CertManager {
		b = b.Owns(&cmapi.Certificate{})
	}
	return b.Complete(r)
}
