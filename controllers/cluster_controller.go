// Package controllers holds the reconcilers of the operator, one per concern.
package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/conditions"
)

// ClusterFieldManager is the field manager of the cluster reconciler's
// status writes.
const ClusterFieldManager = "etcd-operator-cluster"

// ClusterReconciler reconciles the shape of an EtcdCluster. Today it reports
// what it reads from the spec: the member selector for the scale subresource
// and the ConfigurationWarning condition. Member Pods, Services and the
// PodDisruptionBudget are built here by the topology work that follows.
type ClusterReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the status of one EtcdCluster in line with its spec.
// Failures return an error (and controller-runtime retries with back-off);
// RequeueAfter is used only for waits on something known.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	warning := conditions.ConfigurationWarning(cluster)
	if warning.Status == metav1.ConditionTrue && !meta.IsStatusConditionPresentAndEqual(cluster.Status.Conditions, warning.Type, warning.Status) {
		r.Recorder.Eventf(cluster, nil, "Warning", warning.Reason, "Validate", warning.Message)
	}
	err := applyStatus(ctx, r.Client, cluster, ClusterFieldManager, statusPatch{
		conditions: []metav1.Condition{warning},
		fields:     map[string]any{"selector": MemberSelector(cluster).String()},
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("Reconciled cluster", "generation", cluster.Generation)
	return ctrl.Result{}, nil
}

// MemberSelector selects the member Pods of a cluster.
func MemberSelector(cluster *etcdv1alpha1.EtcdCluster) labels.Selector {
	return labels.SelectorFromSet(labels.Set{etcdv1alpha1.LabelCluster: cluster.Name})
}

// SetupWithManager registers the reconciler with mgr.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("etcdcluster").
		Complete(r)
}
