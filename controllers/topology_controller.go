// Package controllers holds the reconcilers of the operator, one per concern.
package controllers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/conditions"
	"github.com/etcd-operator/etcd-operator/internal/crashpoint"
)

// TopologyFieldManager is the field manager of the topology reconciler's
// status writes. Its value predates the reconciler's name and stays, so
// that an upgraded operator keeps owning the fields it wrote.
const TopologyFieldManager = "etcd-operator-cluster"

// TopologyReconciler reconciles the topology of an EtcdCluster: its
// Services, its PodDisruptionBudget and its members (Pods, claims and etcd
// membership), one step per pass, re-deriving everything from etcd and the
// API server. It also reports the ConfigurationWarning condition.
type TopologyReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// NewEtcdClient connects to a cluster's members.
	NewEtcdClient EtcdClientFactory
	// CrashPoints, when armed, stop the process right after a step (tests).
	CrashPoints *crashpoint.Points
	// Image is the operator's image: a restoring seed copies the
	// operator's binary from it (docs/backups.md).
	Image string

	// waits holds, per cluster (its NamespacedName), what its passes have
	// been waiting for (nextWait): a hint for how often to look, never
	// an input to the plan.
	waits sync.Map
}

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=pods;services;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// Nodes are cluster-scoped: config/rbac/node_reader_role.yaml grants reading them.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// Reconcile takes one step of an EtcdCluster towards its spec. Failures
// return an error (and controller-runtime retries with back-off);
// RequeueAfter is used only for waits on something known.
func (r *TopologyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "topology", err) }()
	cluster := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		r.waits.Delete(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		r.waits.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	if w := conditions.ConfigurationWarning(cluster, ""); w.Status == metav1.ConditionTrue && !meta.IsStatusConditionPresentAndEqual(cluster.Status.Conditions, w.Type, w.Status) {
		r.event(cluster, corev1.EventTypeWarning, w.Reason, "%s", w.Message)
	}
	// claimsRefused is why the claims cannot grow, for ConfigurationWarning;
	// childRefused is the refusal of a Service or the PodDisruptionBudget
	// (by the API server, or because one of the cluster's names belongs to
	// someone else): the pass then takes no step.
	var claimsRefused string
	var childRefused *action
	if !cluster.IsPaused() {
		if err := r.reconcileChildren(ctx, cluster); err != nil {
			refusal, ok := refusalOf(action{}, err)
			if !ok {
				return ctrl.Result{}, err
			}
			childRefused = &refusal
		}
		if claimsRefused, err = r.growClaims(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	observed, err := r.observe(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	step := certificatesWait(observed, plan(observed))
	var wait time.Duration
	var actErr error
	switch {
	case childRefused != nil:
		step, wait = *childRefused, refusedRequeue
		r.event(cluster, corev1.EventTypeWarning, step.refusal, "%s", step.reason)
	case !cluster.IsPaused():
		wait, actErr = r.act(ctx, cluster, observed, step)
		if refusal, ok := refusalOf(step, actErr); ok {
			step, wait, actErr = refusal, refusedRequeue, nil
			r.event(cluster, corev1.EventTypeWarning, step.refusal, "%s", step.reason)
		}
	}
	// The status says what the pass did, or what the API server refused;
	// this last write carries observedGeneration (statusGeneration).
	status := topologyStatus(observed, step, actErr)
	status.conditions = append(status.conditions, conditions.ConfigurationWarning(cluster, claimsRefused))
	if err := applyStatus(ctx, r.Client, cluster, TopologyFieldManager, status); err != nil {
		return ctrl.Result{}, errors.Join(actErr, err)
	}
	if cluster.IsPaused() {
		return ctrl.Result{}, nil
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	r.CrashPoints.Hit(string(step.kind))
	log.FromContext(ctx).V(1).Info("Reconciled cluster", "step", step.String())
	if lookAgain(observed, step) {
		wait = waitRequeue
	}
	prev, _ := r.waits.Load(req.NamespacedName)
	prevWaiting, _ := prev.(waiting)
	wait, next := nextWait(prevWaiting, step, wait, observed.now)
	if foundingOnWatches(observed, step) {
		wait = 0
	}
	if next.since.IsZero() {
		r.waits.Delete(req.NamespacedName)
	} else {
		r.waits.Store(req.NamespacedName, next)
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// MemberSelector selects the member Pods of a cluster.
func MemberSelector(cluster *etcdv1alpha1.EtcdCluster) labels.Selector {
	return labels.SelectorFromSet(builder.MemberSelectorLabels(cluster))
}

// memberPods lists the member Pods of cluster c: the Pods with its member
// labels that it controls (a Pod that only wears the labels is no member).
// Every reconciler finds the members this way. The Pods of an old cluster
// that a recovery retires are left out: they answer for another cluster.
func memberPods(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) ([]*corev1.Pod, error) {
	all, err := allMemberPods(ctx, reader, c)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(p *corev1.Pod) bool { return retiredBy(c, p.Name) }), nil
}

// allMemberPods are memberPods with the Pods of an old cluster that a
// recovery retires.
func allMemberPods(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) ([]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabelsSelector{Selector: MemberSelector(c)}); err != nil {
		return nil, err
	}
	var members []*corev1.Pod
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], c) {
			members = append(members, &pods.Items[i])
		}
	}
	return members, nil
}

// podNames are the names of pods.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// runningPodNames are the names of the pods that have an address: the
// others (not scheduled, or their sandbox not up) have no etcd to ask.
// Asking them anyway costs a name lookup each, on every pass, and tells
// nothing more: they would not answer.
func runningPodNames(pods []*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		if p.Status.PodIP != "" {
			names = append(names, p.Name)
		}
	}
	return names
}

// clusterWorkers is how many clusters each per-cluster reconciler works on
// at once, so that one whose members time out does not hold up the others.
// A cluster is never reconciled twice at once by the same reconciler.
const clusterWorkers = 4

// SetupWithManager registers the reconciler with mgr.
func (r *TopologyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// A spec change, or an annotation's: resuming (removing the pause
		// annotation) changes no generation and must still wake the plan.
		For(&etcdv1alpha1.EtcdCluster{}, ctrlbuilder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		// The trust bundle, whose change rolls the members.
		Owns(&corev1.Secret{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: clusterWorkers}).
		Named("etcdcluster").
		Complete(r)
}
