package controllers

import (
	"context"
	"time"

	"github.com/operator-framework/operator-lib/conditions"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// upgradeableRecheck is how often the Upgradeable condition is written
// again without a cluster changing: it is re-derived on every pass, and a
// pass also puts it back when someone else changed it.
const upgradeableRecheck = time.Minute

// UpgradeableReconciler reports to OLM, through the operator's
// OperatorCondition (operator-lib's conditions), whether the operator may
// be replaced now: Upgradeable is False while it is changing any cluster
// (upgradeable). It runs only when OLM installed the operator, which sets
// OPERATOR_CONDITION_NAME.
type UpgradeableReconciler struct {
	client.Client
	// Condition is the Upgradeable condition of the operator's
	// OperatorCondition.
	Condition conditions.Condition
}

// upgradeableKey is the one request of the reconciler: there is one
// condition, for every cluster.
var upgradeableKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "upgradeable"}}

// Reconcile derives the Upgradeable condition from every EtcdCluster's
// status and writes it when it differs from what the OperatorCondition
// holds.
func (r *UpgradeableReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var clusters etcdv1alpha1.EtcdClusterList
	if err := r.List(ctx, &clusters); err != nil {
		return ctrl.Result{}, err
	}
	want := upgradeable(clusters.Items)
	// Get fails when the condition was never set; then it is set.
	if have, err := r.Condition.Get(ctx); err == nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
		return ctrl.Result{RequeueAfter: upgradeableRecheck}, nil
	}
	if err := r.Condition.Set(ctx, want.Status, conditions.WithReason(want.Reason), conditions.WithMessage(want.Message)); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Upgradeable condition set", "status", want.Status, "reason", want.Reason, "message", want.Message)
	return ctrl.Result{RequeueAfter: upgradeableRecheck}, nil
}

// SetupWithManager starts the reconciler on every EtcdCluster created or
// deleted, or whose change in flight (changeInFlight) starts or ends, and
// once at start: with no cluster at all, the condition is True.
func (r *UpgradeableReconciler) SetupWithManager(mgr ctrl.Manager) error {
	changed := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld.(*etcdv1alpha1.EtcdCluster), e.ObjectNew.(*etcdv1alpha1.EtcdCluster)
		return changeInFlight(before) != changeInFlight(after)
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("operator-upgradeable").
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{upgradeableKey}
		}), ctrlbuilder.WithPredicates(changed)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(upgradeableKey)
			return nil
		})).
		Complete(r)
}
