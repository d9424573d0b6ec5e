package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// HealthFieldManager is the field manager of the health reconciler's
// status writes: status.members and the QuorumAvailable, Degraded, Alarm
// and Maintenance conditions.
const HealthFieldManager = "etcd-operator-health"

// DefaultProbeInterval is how often the health reconciler probes a
// cluster when nothing else prompts it.
const DefaultProbeInterval = 10 * time.Second

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdclusters,verbs=get;list;watch;patch

// HealthReconciler probes every member of a cluster through the etcd API on
// a steady interval and when its Pods change, publishes what it finds
// (status.members, health conditions, metrics, events), and keeps the
// databases in shape (compaction, defragmentation, NOSPACE). It never
// changes membership or deletes Pods: the topology reconciler replaces a
// member that stays unhealthy.
type HealthReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// NewEtcdClient connects to a cluster's members.
	NewEtcdClient EtcdClientFactory
	// Interval is how often a cluster is probed; DefaultProbeInterval when 0.
	Interval time.Duration

	// edited holds, per cluster, the last edit of a request carried out
	// (doneEdit): until the cache has seen it, a pass reads the request
	// as it was and must not carry it out twice.
	edited sync.Map
}

// Reconcile probes one cluster, publishes the result and takes at most one
// step of upkeep.
func (r *HealthReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "health", err) }()
	cluster := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if client.IgnoreNotFound(err) == nil {
			forgetCluster(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		forgetCluster(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	pods, err := memberPods(ctx, r.Client, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	endpoints := memberURLs(cluster, runningPodNames(pods))
	p := probeMembers(ctx, r.NewEtcdClient, cluster, endpoints, true)
	if err := r.clearStaleMarks(ctx, cluster, pods, p); err != nil {
		return ctrl.Result{}, err
	}
	lost, err := r.quorumLoss(ctx, cluster, pods, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	report := assess(cluster, p, lost, time.Now())
	step := planMaintenance(cluster, p)
	for _, e := range append(healthEvents(cluster.Status.Members, report.members), heldEvents(cluster, step)...) {
		r.event(cluster, e.eventType, e.reason, "%s", e.message)
	}
	recordHealth(cluster.Namespace, cluster.Name, report, p.members != nil)
	if err := r.applyHealth(ctx, cluster, report, step); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.maintain(ctx, cluster, endpoints, step); err != nil {
		return ctrl.Result{}, err
	}
	interval := r.Interval
	if interval == 0 {
		interval = DefaultProbeInterval
	}
	switch {
	case step.acts():
		interval = time.Second
	case len(endpoints) == 0:
		// No member Pod runs: there is nothing to probe until a Pod
		// changes, and the Pod watch starts a pass then. (Every 30 s, a
		// thousand such clusters cost a sixth of a core.)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// quorumLoss is, when no member gave the member list, what the members
// that answer tell about c's quorum, with its Pods and claims: whether it
// is lost for good, and the evidence; nil otherwise.
func (r *HealthReconciler) quorumLoss(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pods []*corev1.Pod, p probe) (*quorumLoss, error) {
	if p.local == nil {
		return nil, nil // a quorum gave the member list, or no member answers
	}
	claims, _, err := claimsOf(ctx, r.Client, c)
	if err != nil {
		return nil, err
	}
	byName := map[string]*corev1.Pod{}
	for _, pod := range pods {
		byName[pod.Name] = pod
	}
	if l, judged := lostQuorum(c, p, byName, claims); judged {
		return &l, nil
	}
	return nil, nil
}

// applyHealth writes status.members and the health conditions.
func (r *HealthReconciler) applyHealth(ctx context.Context, c *etcdv1alpha1.EtcdCluster, report healthReport, step maintenance) error {
	members := make([]any, 0, len(report.members))
	for i := range report.members {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&report.members[i])
		if err != nil {
			return fmt.Errorf("converting member status: %w", err)
		}
		members = append(members, u)
	}
	patch := statusPatch{conditions: append(report.conditions, maintenanceCondition(c, step)), fields: map[string]any{"members": members}}
	if report.recoveryPlan != nil {
		// Absent from the apply, the field is removed: the plan shows only
		// while the quorum is lost for good.
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(report.recoveryPlan)
		if err != nil {
			return fmt.Errorf("converting the recovery plan: %w", err)
		}
		patch.fields["recoveryPlan"] = u
	}
	return applyStatus(ctx, r.Client, c, HealthFieldManager, patch)
}

// maintain carries out one step of maintenance and then, for a request,
// edits its annotations.
func (r *HealthReconciler) maintain(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string, m maintenance) error {
	key := client.ObjectKeyFromObject(c).String()
	if done, ok := r.edited.Load(key); ok {
		if d := done.(doneEdit); !d.seenIn(c) && time.Since(d.at) < staleCacheWindow {
			if m.edit != nil {
				return nil // the cache has not seen the edit of a request done already
			}
		} else {
			r.edited.Delete(key) // seen: the same request asked again is new
		}
	}
	if !m.acts() {
		return nil
	}
	if err := r.etcdStep(ctx, c, endpoints, m); err != nil {
		return err
	}
	if m.edit == nil {
		return nil
	}
	patch, err := requestPatch(c, *m.edit)
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, c, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("recording that %s is done (annotation %s): %w", m.kind, m.edit.test, err)
	}
	r.edited.Store(key, doneEdit{edit: *m.edit, at: time.Now()})
	return nil
}

// staleCacheWindow bounds how long a pass takes the cache for stale when
// it does not show a request's edit yet: the cache is usually behind by
// milliseconds, and a user may ask for the same again later.
const staleCacheWindow = time.Minute

// doneEdit is the edit of a request that was carried out, and when.
type doneEdit struct {
	edit requestEdit
	at   time.Time
}

// seenIn tells whether c shows the edit: its annotations removed and set.
// Not the resourceVersion: a long step (a defragmentation of minutes) is
// outlived by other writes to the cluster, which the cache may have seen
// without this one.
func (d doneEdit) seenIn(c *etcdv1alpha1.EtcdCluster) bool {
	for _, k := range d.edit.remove {
		if _, ok := c.Annotations[k]; ok {
			return false
		}
	}
	for k, v := range d.edit.set {
		if c.Annotations[k] != v {
			return false
		}
	}
	return true
}

// etcdStep is the etcd side of a step of maintenance.
func (r *HealthReconciler) etcdStep(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string, m maintenance) error {
	if m.kind == maintRequestDone {
		if m.edit.test != etcdv1alpha1.AnnotationDefragmented { // forgetting a cancelled request's progress is no news
			r.event(c, corev1.EventTypeNormal, "RequestDone", "%s", upperFirst(m.reason))
		}
		return nil
	}
	ec, err := r.NewEtcdClient(ctx, c, endpoints)
	if err != nil {
		return err
	}
	defer func() { _ = ec.Close() }()
	logger := log.FromContext(ctx).WithValues("step", m.kind, "member", m.member)
	if m.kind == maintCompact || m.compactFirst {
		why := m.reason
		if m.kind != maintCompact {
			why = "NOSPACE: old revisions go before databases are defragmented and the alarm disarmed"
		}
		rev, err := ec.Compact(ctx)
		switch {
		case errors.Is(err, etcd.ErrAlreadyCompacted):
		case err != nil:
			return err
		default:
			logger.Info("Compacted", "revision", rev)
			r.event(c, corev1.EventTypeNormal, "Compacted", "Compacted the key space to revision %d (%s)", rev, why)
		}
	}
	switch m.kind {
	case maintDefragment:
		// The member serves nothing until done: the mark keeps the
		// topology reconciler from replacing it for that.
		if err := r.markDefragmenting(ctx, c, m.member, true); err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, c.DefragmentBudget())
		defer cancel()
		start := time.Now()
		if err := ec.Defragment(dctx, m.endpoint); err != nil {
			// The mark stays: etcd goes on defragmenting when the call
			// ends early (the operator stopping, the budget spent), and
			// clearStaleMarks removes it once the member answers or the
			// budget has passed. (Removed here, a member still
			// defragmenting when the operator was restarted was replaced
			// for not answering.)
			r.event(c, corev1.EventTypeWarning, "DefragmentationFailed", "Defragmenting %s: %v", m.member, err)
			return err
		}
		if err := r.markDefragmenting(context.WithoutCancel(ctx), c, m.member, false); err != nil {
			return err
		}
		logger.Info("Defragmented", "took", time.Since(start))
		r.event(c, corev1.EventTypeNormal, "Defragmented", "Defragmented %s in %s (%s)", m.member, time.Since(start).Round(time.Millisecond), m.reason)
	case maintMoveLeader:
		if err := ec.MoveLeader(ctx, m.id); err != nil {
			r.event(c, corev1.EventTypeWarning, "MoveLeaderFailed", "Moving leadership from %s to %s: %v", m.from, m.member, err)
			return err
		}
		logger.Info("Moved leadership", "from", m.from)
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "Moved leadership from %s to %s, as the annotation %s asked", m.from, m.member, etcdv1alpha1.AnnotationMoveLeader)
	case maintDisarm:
		if err := ec.DisarmAlarm(ctx, m.alarm); err != nil {
			return err
		}
		logger.Info("Disarmed alarm", "alarm", m.alarm.Type)
		r.event(c, corev1.EventTypeNormal, "AlarmDisarmed", "Disarmed %s of member %s: %s", m.alarm.Type, etcd.FormatID(m.alarm.MemberID), m.reason)
	}
	return nil
}

// markDefragmenting sets, or with on false removes, the annotation
// AnnotationDefragmenting on the Pod of member.
func (r *HealthReconciler) markDefragmenting(ctx context.Context, c *etcdv1alpha1.EtcdCluster, member string, on bool) error {
	var value any // null removes it
	if on {
		value = time.Now().UTC().Format(time.RFC3339)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{etcdv1alpha1.AnnotationDefragmenting: value}}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: member}}
	if err := r.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking the Pod of %s as defragmenting (%v): %w", member, on, err)
	}
	return nil
}

// clearStaleMarks removes the AnnotationDefragmenting of a pass that
// stopped mid-defragmentation (the operator restarted): etcd goes on
// defragmenting without its client, so a mark goes only once its member
// answers a health probe again (p) or its budget has passed.
func (r *HealthReconciler) clearStaleMarks(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pods []*corev1.Pod, p probe) error {
	answers := map[string]bool{}
	for _, m := range p.members {
		if err, probed := p.health[m.ID]; probed && err == nil {
			answers[memberName(c, m)] = true
		}
	}
	now := time.Now()
	for _, pod := range pods {
		if _, ok := pod.Annotations[etcdv1alpha1.AnnotationDefragmenting]; !ok {
			continue
		}
		if answers[pod.Name] || !defragmenting(pod, c.DefragmentBudget(), now) {
			if err := r.markDefragmenting(ctx, c, pod.Name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *HealthReconciler) event(c *etcdv1alpha1.EtcdCluster, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, eventType, reason, "Probe", format, args...)
	}
}

// SetupWithManager registers the reconciler with mgr. Clusters are probed
// concurrently, so a slow one does not delay the others. An annotation
// change (a request, pausing) is looked at at once.
func (r *HealthReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdCluster{}, ctrlbuilder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: clusterWorkers}).
		Named("etcdcluster-health").
		Complete(r)
}
