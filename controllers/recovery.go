package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// A quorum lost for good is recovered by rebuilding the cluster from its
// most advanced survivor (docs/design/recovery.md): once the plan is
// approved, it is recorded in status.recovery (1); a new member, the seed,
// restores the survivor's snapshot and founds a one-member cluster (2);
// its cluster ID becomes the cluster's once it serves (3); the old
// cluster's Pods are deleted (4), and the recovery is complete; the
// ordinary topology grows the cluster back to spec.replicas (5). Nothing
// runs with --force-new-cluster, and every step is re-derived from the
// status, the Pods and etcd on each pass: the survivors keep their data
// until the seed serves it.

// retiredBy tells whether the member Pod named name belongs to the old
// cluster that c's running recovery replaces: such a Pod answers for
// another cluster ID and is no member of the rebuilt one, so no reconciler
// counts it as a member. A complete recovery retired them all (it
// completes once they are gone), so a Pod of a later founding that reuses
// a name is a member again.
func retiredBy(c *etcdv1alpha1.EtcdCluster, name string) bool {
	return c.Recovering() && slices.Contains(c.Status.Recovery.Retired, name)
}

// planRecoveryApproval decides, for a cluster whose quorum is lost for good
// with a survivor to rebuild from, whether to start the rebuild: only when
// the annotation approves the plan this pass computes (a stale one is
// refused) or spec.recovery.quorumLoss is Automatic and every voter that
// keeps its Pod answers. False when there is no such plan.
func planRecoveryApproval(o observed) (action, bool) {
	c := o.cluster
	plan := o.loss.recoveryPlan(c)
	if plan == nil {
		return action{}, false
	}
	approval := c.Annotations[etcdv1alpha1.AnnotationApproveRecovery]
	auto := c.QuorumLossPolicy() == etcdv1alpha1.QuorumLossAutomatic
	switch {
	case approval != plan.ID && (!auto && approval == "" || o.loss.waitsForSilent(c)):
		return action{kind: actWait, reason: "the quorum is lost for good: " + o.loss.choice(c)}, true
	case !auto && approval != plan.ID:
		return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonStalePlan, reason: fmt.Sprintf(
			"%s=%s names another plan than the current one, %s (survivor %s at raft index %d, up to %d raft entries at risk): nothing changes. Read status.recoveryPlan and annotate with its ID to approve it",
			etcdv1alpha1.AnnotationApproveRecovery, approval, plan.ID, plan.Survivor, plan.RaftIndex, plan.EntriesAtRisk)}, true
	case recoveryImpossible(c) != "":
		return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonRecoveryImpossible, reason: recoveryImpossible(c)}, true
	case o.image == "":
		return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonRecoveryImpossible,
			reason: "the operator does not know its own image (environment variable OPERATOR_IMAGE), which the seed runs to restore the survivor's snapshot: set it in the operator's Deployment"}, true
	}
	by := etcdv1alpha1.AnnotationApproveRecovery + "=" + plan.ID
	if auto {
		by = "spec.recovery.quorumLoss=Automatic"
	}
	// A name no member of the old cluster had, gone ones included.
	named := o
	named.members = o.loss.local
	rec := &etcdv1alpha1.RecoveryStatus{
		PlanID: plan.ID, ApprovedBy: by,
		Survivor: plan.Survivor, SurvivorID: plan.SurvivorID, SurvivorRaftIndex: plan.RaftIndex, EntriesAtRisk: plan.EntriesAtRisk,
		FromClusterID: c.Status.ClusterID, Seed: nextMemberName(c, named),
		Retired:   slices.Sorted(maps.Keys(o.pods)),
		StartedAt: metav1.NewTime(o.now),
	}
	return action{kind: actStartRecovery, member: rec.Seed, recovery: rec, reason: fmt.Sprintf(
		"rebuilding the cluster from survivor %s (plan %s, approved by %s): seed %s restores its snapshot", plan.Survivor, plan.ID, by, rec.Seed)}, true
}

// planRecovery is the next step of the recovery status.recovery records.
// o holds the seed and the members that joined it; o.retiring the old
// cluster's Pods.
func planRecovery(o observed) action {
	c := o.cluster
	rec := c.Status.Recovery
	if c.Status.ClusterID == rec.FromClusterID {
		seed, ok := o.pods[rec.Seed]
		switch {
		case !ok:
			return action{kind: actCreateRecoverySeed, member: rec.Seed, recovery: rec,
				initialCluster: builder.InitialCluster(map[string]string{rec.Seed: builder.PeerURL(c, rec.Seed)}),
				reason:         fmt.Sprintf("recovery %s: seed %s restores the snapshot of survivor %s and founds the rebuilt cluster", rec.PlanID, rec.Seed, rec.Survivor)}
		case seed.DeletionTimestamp != nil:
			return action{kind: actWait, member: rec.Seed, reason: fmt.Sprintf("recovery %s: the seed's Pod %s is being deleted; it is created again once gone", rec.PlanID, rec.Seed)}
		case o.members != nil:
			// This pass's status write records the seed's cluster ID.
			return action{kind: actWait, member: rec.Seed, reason: fmt.Sprintf("recovery %s: seed %s serves the rebuilt cluster %s; the old cluster's Pods go next", rec.PlanID, rec.Seed, etcd.FormatID(o.clusterID))}
		}
		why := fmt.Sprintf("recovery %s: seed %s restores the snapshot of survivor %s", rec.PlanID, rec.Seed, rec.Survivor)
		if res, failed := restoreFailure(seed); failed {
			why += fmt.Sprintf("; its last attempt failed (%s: %s), retried with back-off", res.Reason, res.Message)
		}
		return action{kind: actWait, member: rec.Seed, reason: why}
	}
	for _, name := range slices.Sorted(maps.Keys(o.retiring)) {
		if p := o.retiring[name]; p.DeletionTimestamp == nil || o.lostNodes[p.Spec.NodeName] {
			return action{kind: actRetirePod, member: name, force: o.lostNodes[p.Spec.NodeName],
				reason: fmt.Sprintf("recovery %s: Pod %s belongs to the old cluster %s, rebuilt as %s", rec.PlanID, name, rec.FromClusterID, c.Status.ClusterID)}
		}
	}
	if len(o.retiring) > 0 {
		return action{kind: actWait, reason: fmt.Sprintf("recovery %s: the old cluster's Pods %s are terminating", rec.PlanID, strings.Join(slices.Sorted(maps.Keys(o.retiring)), ", "))}
	}
	return action{kind: actCompleteRecovery, member: rec.Seed, reason: fmt.Sprintf("recovery %s: the rebuilt cluster %s serves and the old cluster's Pods are gone", rec.PlanID, c.Status.ClusterID)}
}

// recordRecovery writes rec as status.recovery, conflict-checked: a pass
// that read an older status (another recovery recorded meanwhile, the
// cluster ID changed) writes nothing and is retried.
func (r *TopologyReconciler) recordRecovery(ctx context.Context, c *etcdv1alpha1.EtcdCluster, rec *etcdv1alpha1.RecoveryStatus) error {
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	updated := c.DeepCopy()
	updated.Status.Recovery = rec
	if err := r.Status().Patch(ctx, updated, patch); err != nil {
		return fmt.Errorf("recording recovery %s: %w", rec.PlanID, err)
	}
	return nil
}

// completedRecovery is c's recovery marked complete at now, with the
// revision its seed restored (from the seed's restore result).
func completedRecovery(o observed) *etcdv1alpha1.RecoveryStatus {
	rec := o.cluster.Status.Recovery.DeepCopy()
	rec.CompletedAt = &metav1.Time{Time: o.now}
	if p, ok := o.pods[rec.Seed]; ok {
		if res, ok := restoreResult(p); ok {
			rec.ResumedAtRevision = res.Revision
		}
	}
	return rec
}

// recoveredCondition is the Recovered condition (ok false when there is
// none): False when an approval is refused, Unknown while a recovery
// runs, True once one is complete.
func recoveredCondition(o observed, a action) (metav1.Condition, bool) {
	c := o.cluster
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionRecovered, ObservedGeneration: c.Generation}
	rec := c.Status.Recovery
	switch {
	case a.kind == actRefuse && (a.refusal == etcdv1alpha1.ReasonStalePlan || a.refusal == etcdv1alpha1.ReasonRecoveryImpossible):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, a.refusal, a.reason
	case a.kind == actStartRecovery:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, etcdv1alpha1.ReasonRecovering, a.reason
	case rec == nil:
		return cond, false
	case rec.CompletedAt != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveredFromSurvivor, recoveredMessage(rec, c.Status.ClusterID)
	default:
		cond.Status, cond.Reason = metav1.ConditionUnknown, etcdv1alpha1.ReasonRecovering
		cond.Message = fmt.Sprintf("Rebuilding the cluster from survivor %s (plan %s, approved by %s): %s", rec.Survivor, rec.PlanID, rec.ApprovedBy, a.String())
	}
	return cond, true
}

// recoveredMessage says what a complete recovery did.
func recoveredMessage(rec *etcdv1alpha1.RecoveryStatus, clusterID string) string {
	return fmt.Sprintf("Rebuilt from survivor %s (member %s, raft index %d; plan %s, approved by %s) at %s: etcd cluster %s became %s, resuming at revision %d; up to %d raft entries other members were seen holding were lost. The old cluster's Pods (%s) were deleted.",
		rec.Survivor, rec.SurvivorID, rec.SurvivorRaftIndex, rec.PlanID, rec.ApprovedBy, rec.CompletedAt.UTC().Format("2006-01-02T15:04:05Z"),
		rec.FromClusterID, clusterID, rec.ResumedAtRevision, rec.EntriesAtRisk, strings.Join(rec.Retired, ", "))
}

// restoreResult is the result the restore container of seed Pod p left
// when it last succeeded.
func restoreResult(p *corev1.Pod) (backup.Result, bool) {
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; s.Name == builder.RestoreContainer && t != nil && t.ExitCode == 0 {
			res, err := backup.ParseResult(t.Message)
			return res, err == nil
		}
	}
	return backup.Result{}, false
}
