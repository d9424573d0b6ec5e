package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// Waits of the topology: short, since each pass takes one step.
const (
	stepRequeue = 500 * time.Millisecond
	waitRequeue = 2 * time.Second
)

// reconcileChildren applies the Services and the PodDisruptionBudget.
func (r *TopologyReconciler) reconcileChildren(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	for _, obj := range []client.Object{builder.HeadlessService(c), builder.ClientService(c)} {
		if err := r.apply(ctx, obj); err != nil {
			return err
		}
	}
	pdb := builder.PodDisruptionBudget(c)
	if pdb == nil {
		return r.deleteOwned(ctx, c, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}})
	}
	return r.apply(ctx, pdb)
}

// deleteOwned deletes the object of obj's name when the cluster controls
// it; someone else's object of that name is left alone.
func (r *TopologyReconciler) deleteOwned(ctx context.Context, c *etcdv1alpha1.EtcdCluster, obj client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, c) {
		return nil
	}
	uid := obj.GetUID()
	return client.IgnoreNotFound(r.Delete(ctx, obj, client.Preconditions{UID: &uid}))
}

// apply server-side applies a built object as the topology reconciler.
func (r *TopologyReconciler) apply(ctx context.Context, obj client.Object) error {
	return applyObject(ctx, r.Client, obj, TopologyFieldManager)
}

// observe reads the cluster's member Pods and, through them, etcd.
func (r *TopologyReconciler) observe(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (observed, error) {
	o := observed{cluster: c, pods: map[string]*corev1.Pod{}, retiring: map[string]*corev1.Pod{}, image: r.Image}
	all, err := allMemberPods(ctx, r.Client, c)
	if err != nil {
		return o, err
	}
	if o.claims, o.allClaims, err = claimsOf(ctx, r.Client, c); err != nil {
		return o, err
	}
	o.now = time.Now()
	var pods []*corev1.Pod
	for _, p := range all {
		if retiredBy(c, p.Name) {
			o.retiring[p.Name] = p
			continue
		}
		o.pods[p.Name] = p
		pods = append(pods, p)
	}
	endpoints := memberURLs(c, runningPodNames(pods))
	if o.lostNodes, err = r.lostNodes(ctx, all); err != nil {
		return o, err
	}
	if c.Spec.Security.TLSEnabled() {
		bundle := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.TrustBundleSecretName(c)}, bundle); err == nil {
			o.trustHash = builder.TrustBundleHash(bundle.Data)
		} else if !apierrors.IsNotFound(err) {
			return o, err
		}
	}
	if b := c.Spec.Bootstrap; b != nil && b.Restore != nil && c.Status.ClusterID == "" {
		if o.restore, o.restoreProblem, err = restoreSource(ctx, r.Client, c, r.Image); err != nil {
			return o, err
		}
	}
	pr := probeMembers(ctx, r.NewEtcdClient, c, endpoints, false)
	o.members, o.clusterID, o.leader, o.version, o.etcdErr = pr.members, pr.clusterID, pr.leader, pr.version, pr.err
	o.versions, o.appliedIndexes = map[string]string{}, map[string]uint64{}
	for name := range o.pods {
		if st, ok := pr.statuses[builder.ClientURL(c, name)]; ok {
			o.versions[name], o.appliedIndexes[name] = st.Version, st.RaftAppliedIndex
		}
	}
	o.loss, _ = lostQuorum(c, pr, o.pods, o.claims)
	if pr.members != nil {
		o.healthy = pr.healthyVoters()
		o.clusterIDs = map[string]uint64{}
		for ep, st := range pr.statuses {
			o.clusterIDs[ep] = st.ClusterID
		}
	}
	return o, nil
}

// claimsOf tells which members of c have a claim: live, those not being
// deleted; all, every one.
func claimsOf(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) (live, all map[string]bool, err error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := reader.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
		return nil, nil, err
	}
	live, all = map[string]bool{}, map[string]bool{}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if !metav1.IsControlledBy(pvc, c) {
			continue
		}
		all[pvc.Labels[etcdv1alpha1.LabelMember]] = true
		if pvc.DeletionTimestamp == nil {
			live[pvc.Labels[etcdv1alpha1.LabelMember]] = true
		}
	}
	return live, all, nil
}

// createMemberPod creates the claim (for a member that never ran: one
// that ran must find its data, or be replaced) and the Pod of member name
// for step a, starting with initial cluster state.
func (r *TopologyReconciler) createMemberPod(ctx context.Context, c *etcdv1alpha1.EtcdCluster, o observed, a action, name, state string) (time.Duration, error) {
	if claim := builder.MemberClaim(c, name); claim != nil && !a.started {
		if ok, err := r.createClaim(ctx, c, claim); err != nil || !ok {
			return waitRequeue, refused("PersistentVolumeClaim", claim.Name, err)
		}
	}
	pod := builder.MemberPod(c, builder.Member{Name: name, ClusterState: state, InitialCluster: a.initialCluster, TrustBundleHash: o.trustHash})
	switch {
	case a.restore != nil && name == a.member:
		builder.WithRestore(pod, c, a.restore, r.Image)
	case a.recovery != nil && name == a.member:
		builder.WithRecovery(pod, c, a.recovery, r.Image)
	}
	if err := r.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
		existing := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return 0, err
		}
		if err := foreign("Pod", pod, existing); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, refused("Pod", pod.Name, err)
	}
	log.FromContext(ctx).Info("Created member Pod", "step", a.kind, "member", name)
	r.event(c, corev1.EventTypeNormal, "MemberPodCreated", "Created Pod %s (%s)", name, a.reason)
	return 0, nil
}

// lostNodes tells which nodes of the Pods are not Ready (or gone).
func (r *TopologyReconciler) lostNodes(ctx context.Context, pods []*corev1.Pod) (map[string]bool, error) {
	lost := map[string]bool{}
	for _, p := range pods {
		name := p.Spec.NodeName
		if _, seen := lost[name]; seen || name == "" {
			continue
		}
		node := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			lost[name] = true
			continue
		}
		lost[name] = !nodeReady(node)
	}
	return lost, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// act carries out one planned step. It returns how long to wait before
// the next pass.
func (r *TopologyReconciler) act(ctx context.Context, c *etcdv1alpha1.EtcdCluster, o observed, a action) (time.Duration, error) {
	logger := log.FromContext(ctx).WithValues("step", a.kind, "member", a.member)
	switch a.kind {
	case actNone:
		return 0, nil
	case actWait:
		return waitRequeue, nil
	case actBlocked:
		r.event(c, corev1.EventTypeWarning, "Blocked", "%s", a.reason)
		return waitRequeue, nil
	case actRefuse:
		r.event(c, corev1.EventTypeWarning, a.refusal, "Refusing to change membership: %s", a.reason)
		return waitRequeue, nil
	case actCreateSeed:
		// A seed that restores with root's password sets it in the
		// restored data: the Secret comes first.
		if a.restore != nil && c.Spec.Security.AuthEnabled() && !c.Spec.Security.OperatorClientCert() {
			if _, err := ensureRootPassword(ctx, r.Client, c); err != nil {
				return 0, err
			}
		}
		// The founders' Pods together: a pass waits on etcd, which does
		// not answer before a majority of them runs.
		for _, name := range a.founders {
			if requeue, err := r.createMemberPod(ctx, c, o, a, name, builder.ClusterStateNew); err != nil {
				return requeue, err
			}
		}
		return stepRequeue, nil
	case actCreateRecoverySeed:
		if requeue, err := r.createMemberPod(ctx, c, o, a, a.member, builder.ClusterStateNew); err != nil {
			return requeue, err
		}
		return stepRequeue, nil
	case actCreatePod:
		if requeue, err := r.createMemberPod(ctx, c, o, a, a.member, builder.ClusterStateExisting); err != nil {
			return requeue, err
		}
		return stepRequeue, nil
	case actSealSeed:
		if err := r.annotatePod(ctx, o.pods[a.member], etcdv1alpha1.AnnotationInitialClusterState, builder.ClusterStateExisting); err != nil {
			return 0, fmt.Errorf("sealing the founder %s: %w", a.member, err)
		}
		logger.Info("Sealed the founder")
		return stepRequeue, nil
	case actSetPeers:
		for _, name := range a.stale {
			if err := r.annotatePod(ctx, o.pods[name], etcdv1alpha1.AnnotationInitialCluster, a.initialCluster); err != nil {
				return 0, fmt.Errorf("setting the --initial-cluster of %s: %w", name, err)
			}
		}
		logger.V(1).Info("Set the members a Pod restarts with", "pods", a.stale, "initialCluster", a.initialCluster)
		return stepRequeue, nil
	case actNoteIndex:
		if err := r.annotatePod(ctx, o.pods[a.member], etcdv1alpha1.AnnotationLearnerProgress, a.progress.String()); err != nil {
			return 0, fmt.Errorf("noting the progress of learner %s: %w", a.member, err)
		}
		logger.V(1).Info("Noted learner progress", "appliedIndex", a.progress.Index)
		return stepRequeue, nil
	case actRoll:
		pod := o.pods[a.member]
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
		logger.Info("Rolling member")
		r.event(c, corev1.EventTypeNormal, "MemberRolling", "Deleted Pod %s to rebuild it from the current spec: %s", a.member, a.reason)
		return stepRequeue, nil
	case actStartRecovery:
		if err := r.recordRecovery(ctx, c, a.recovery); err != nil {
			return 0, err
		}
		logger.Info("Recovery approved", "plan", a.recovery.PlanID, "survivor", a.recovery.Survivor)
		r.event(c, corev1.EventTypeWarning, "RecoveryStarted", "Rebuilding the cluster from survivor %s: %s", a.recovery.Survivor, a.reason)
		return stepRequeue, nil
	case actCompleteRecovery:
		rec := completedRecovery(o)
		if err := r.recordRecovery(ctx, c, rec); err != nil {
			return 0, err
		}
		logger.Info("Recovery complete", "plan", rec.PlanID, "clusterID", c.Status.ClusterID)
		r.event(c, corev1.EventTypeNormal, etcdv1alpha1.ReasonRecoveredFromSurvivor, "%s", recoveredMessage(rec, c.Status.ClusterID))
		return stepRequeue, nil
	case actDeletePod, actRetirePod:
		pod := o.pods[a.member]
		if a.kind == actRetirePod {
			pod = o.retiring[a.member]
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
		if a.force {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if err := r.Delete(ctx, pod, opts...); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
		if claim := builder.MemberClaim(c, a.member); claim != nil {
			if err := r.deleteOwned(ctx, c, claim); err != nil {
				return 0, err
			}
		}
		r.event(c, corev1.EventTypeNormal, "MemberPodDeleted", "Deleted Pod %s: %s", a.member, a.reason)
		return stepRequeue, nil
	}

	ec, err := r.NewEtcdClient(ctx, c, memberEndpoints(c, o))
	if err != nil {
		return 0, err
	}
	defer func() { _ = ec.Close() }()
	switch a.kind {
	case actAddLearner:
		_, _, err := ec.AddLearner(ctx, []string{builder.PeerURL(c, a.member)})
		if errors.Is(err, etcd.ErrUnhealthyCluster) {
			return reconfigRequeue(o), nil
		}
		if err != nil {
			return 0, fmt.Errorf("adding learner %s: %w", a.member, err)
		}
		logger.Info("Added learner")
		r.event(c, corev1.EventTypeNormal, "MemberAdded", "Added %s as a learner (%s)", a.member, a.reason)
		return stepRequeue, nil
	case actPromote:
		err := ec.Promote(ctx, a.id)
		if errors.Is(err, etcd.ErrLearnerNotReady) {
			return learnerRequeue(o, a.member), nil
		}
		if errors.Is(err, etcd.ErrUnhealthyCluster) {
			return reconfigRequeue(o), nil
		}
		if err != nil {
			return 0, fmt.Errorf("promoting %s: %w", a.member, err)
		}
		logger.Info("Promoted learner")
		r.event(c, corev1.EventTypeNormal, "MemberPromoted", "Promoted %s to a voting member", a.member)
		return stepRequeue, nil
	case actMoveLeader:
		to, ok := leaderSuccessor(o, a.id)
		if !ok {
			return waitRequeue, nil
		}
		if err := ec.MoveLeader(ctx, to.ID); err != nil {
			return 0, fmt.Errorf("moving leadership away from %s: %w", a.member, err)
		}
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "Moved leadership from %s to %s: %s", a.member, memberName(c, to), a.reason)
		return stepRequeue, nil
	case actRemove:
		err := ec.Remove(ctx, a.id)
		if errors.Is(err, etcd.ErrUnhealthyCluster) {
			return reconfigRequeue(o), nil
		}
		if err != nil && !errors.Is(err, etcd.ErrMemberNotFound) {
			return 0, fmt.Errorf("removing member %s: %w", a.member, err)
		}
		r.event(c, corev1.EventTypeNormal, "MemberRemoved", "Removed member %s (%s)", a.member, a.reason)
		if _, hasPod := o.pods[a.member]; !hasPod {
			if claim := builder.MemberClaim(c, a.member); claim != nil {
				if err := r.deleteOwned(ctx, c, claim); err != nil {
					return 0, err
				}
			}
		}
		return stepRequeue, nil
	}
	return 0, fmt.Errorf("unknown step %s", a.kind)
}

// refusedRequeue is how soon a pass retries an object the API server
// refused: its cause (a missing PriorityClass, a quota) sends no event the
// operator watches.
const refusedRequeue = 10 * time.Second

// refusalError is the API server's refusal of an object the operator
// creates or updates for a cluster (admission, quota, validation): it is
// shown in the cluster's conditions and a Warning event, not only in the
// operator's log, and cleared by the next pass the API server accepts.
type refusalError struct {
	kind, name string
	err        error
}

func (e *refusalError) Error() string {
	return fmt.Sprintf("the API server refused %s %s: %v", e.kind, e.name, e.err)
}

func (e *refusalError) Unwrap() error { return e.err }

// reason is the condition reason of the refusal: MemberPodRefused for a
// member's Pod or claim, ObjectRefused for the other objects.
func (e *refusalError) reason() string {
	if e.kind == "Pod" || e.kind == "PersistentVolumeClaim" {
		return etcdv1alpha1.ReasonMemberPodRefused
	}
	return etcdv1alpha1.ReasonObjectRefused
}

// refused wraps err as a refusalError when the API server refused the
// object (forbidden, invalid or a bad request), else as a plain error
// naming the object; nil stays nil.
func refused(kind, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return &refusalError{kind: kind, name: name, err: err}
	}
	return fmt.Errorf("%s %s: %w", kind, name, err)
}

// refusalStep turns a refused step into a refusal the status shows: what
// was refused, why, and that the operator retries once the cause is gone.
func refusalStep(a action, e *refusalError) action {
	step := ""
	if a.kind != "" {
		step = fmt.Sprintf(" (step %s)", a.kind)
	}
	return action{kind: actRefuse, member: a.member, refusal: e.reason(), reason: fmt.Sprintf(
		"%s%s. The operator retries every %s: fix the cause (create what the message names, raise the quota, or change %s)",
		e.Error(), step, refusedRequeue, specOf(e.kind))}
}

// specOf names the part of an EtcdCluster's spec an object of kind is
// built from.
func specOf(kind string) string {
	switch kind {
	case "Service":
		return "spec.serviceTemplate or spec.headlessServiceTemplate"
	case "PodDisruptionBudget":
		return "spec.podDisruptionBudgetTemplate"
	case "Issuer", "Certificate", "Secret":
		return "spec.security.tls"
	}
	return "spec.podTemplate or spec.storage"
}

// refusalOf is the step the status shows when err is the API server's
// refusal of an object, or an object of the cluster's names that belongs
// to someone else; false for other errors.
func refusalOf(a action, err error) (action, bool) {
	var refusal *refusalError
	var foreignObj *foreignObjectError
	switch {
	case errors.As(err, &refusal):
		return refusalStep(a, refusal), true
	case errors.As(err, &foreignObj):
		return foreignStep(foreignObj), true
	}
	return action{}, false
}

// foreignStep is the refusal the status shows while an object of the
// cluster's names belongs to someone else.
func foreignStep(e *foreignObjectError) action {
	return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonForeignObject, reason: e.Error()}
}

// growClaims grows the members' claims in place to the template's storage
// request (the schema refuses shrinking). When the API server refuses (the
// StorageClass does not allow expansion, say), it returns why: the claims
// keep their size and the member Pods are not touched.
func (r *TopologyReconciler) growClaims(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (string, error) {
	vct := c.Spec.Storage.VolumeClaimTemplate
	if vct == nil {
		return "", nil
	}
	want, ok := vct.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return "", nil
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
		return "", err
	}
	// In name order: the warning names the same claim on every pass (the
	// cache lists in no order, and a message that changes is a status
	// write each pass).
	slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	for i := range claims.Items {
		pvc := &claims.Items[i]
		have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if !metav1.IsControlledBy(pvc, c) || pvc.DeletionTimestamp != nil || want.Cmp(have) <= 0 {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		err := r.Patch(ctx, pvc, patch)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			return fmt.Sprintf("Claim %s cannot grow from %s to %s: %v. The claims keep their size; use a StorageClass that allows volume expansion, or keep the old size",
				pvc.Name, have.String(), want.String(), err), nil
		case err != nil:
			return "", err
		}
		r.event(c, corev1.EventTypeNormal, "ClaimGrown", "Asked for claim %s to grow from %s to %s", pvc.Name, have.String(), want.String())
	}
	return "", nil
}

// createClaim creates a member's claim. A claim of that name that this
// cluster does not control (a cluster of the same name deleted without its
// claims, say) is never reused: foreignObjectError. One being deleted is
// waited for: false.
func (r *TopologyReconciler) createClaim(ctx context.Context, c *etcdv1alpha1.EtcdCluster, claim *corev1.PersistentVolumeClaim) (bool, error) {
	err := r.Create(ctx, claim)
	if !apierrors.IsAlreadyExists(err) {
		return err == nil, err
	}
	existing := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(claim), existing); err != nil {
		return false, err
	}
	if err := foreign("PersistentVolumeClaim", claim, existing); err != nil {
		// It may hold another cluster's data.
		return false, err
	}
	if existing.DeletionTimestamp != nil {
		r.event(c, corev1.EventTypeWarning, "ClaimConflict", "Claim %s is being deleted: the operator creates it again once it is gone", claim.Name)
		return false, nil
	}
	return true, nil
}

// memberEndpoints are the client URLs of the members that have Pods.
func memberEndpoints(c *etcdv1alpha1.EtcdCluster, o observed) []string {
	var eps []string
	for name := range o.pods {
		eps = append(eps, builder.ClientURL(c, name))
	}
	slices.Sort(eps)
	return eps
}

func (r *TopologyReconciler) event(c *etcdv1alpha1.EtcdCluster, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, eventType, reason, "Reconcile", format, args...)
	}
}

// topologyStatus is the part of the status the topology owns: member
// counts, the cluster ID and version, the Initialized, Ready and
// Progressing conditions, and observedGeneration, computed from what the
// pass observed and decided and how its step went (actErr).
// status.members is the health reconciler's.
func topologyStatus(o observed, a action, actErr error) statusPatch {
	c := o.cluster
	ready := readyVoters(o)
	// Members, not Pods: during a roll the new member's Pod may exist
	// before it joins, and counting it showed every replica updated
	// while an old member was still to leave.
	updated, specHash := 0, builder.PodSpecHash(c)
	for _, m := range o.members {
		if p, ok := o.pods[memberName(c, m)]; ok && !o.outdated(p, specHash) {
			updated++
		}
	}
	fields := map[string]any{"replicas": int64(len(o.members)), "readyReplicas": int64(ready), "updatedReplicas": int64(updated), "selector": MemberSelector(c).String(),
		"endpoints": []any{builder.ClientEndpoint(c)}}
	if ca := builder.TLSSourcesOf(c).ServerCA; ca.IsSet() {
		fields["caSecretName"] = ca.Secret
	}
	// The cluster ID stays while no member answers: it is what tells a lost
	// cluster from one never founded.
	switch {
	case o.clusterID != 0:
		fields["clusterID"] = etcd.FormatID(o.clusterID)
	case c.Status.ClusterID != "":
		fields["clusterID"] = c.Status.ClusterID
	}
	if o.version != "" {
		fields["version"] = o.version
	}
	if g := statusGeneration(o, actErr); g != 0 {
		fields["observedGeneration"] = g
	}
	conditions := []metav1.Condition{initializedCondition(o), readyCondition(o, a), progressingCondition(o, a)}
	if cond, ok := restoredCondition(o); ok {
		conditions = append(conditions, cond)
	}
	if cond, ok := recoveredCondition(o, a); ok {
		conditions = append(conditions, cond)
	}
	return statusPatch{conditions: conditions, fields: fields}
}

// statusGeneration is the status.observedGeneration a pass writes. It is
// the cluster's generation when the pass saw everything the status is
// made of for that spec (the API server's objects and etcd's member list)
// and took its step, or refused it and says why in the status; else the
// generation the status had: while no member answers, after a step that
// failed, and while the cluster is paused (its spec is not carried out).
// The status write that carries it is the pass's last, and the value
// reaches the API server only if that write succeeds. The old value is
// written again rather than left out, since server-side apply would
// remove a field its manager no longer sets.
func statusGeneration(o observed, actErr error) int64 {
	c := o.cluster
	if o.members == nil || actErr != nil || c.IsPaused() {
		return c.Status.ObservedGeneration
	}
	return c.Generation
}

// readyVoters counts the ready voters: started voting members that
// answered the pass's linearizable read and whose Pods are Ready and not
// being deleted. status.readyReplicas (the READY column) and the Ready
// condition both count these, so neither says a member is ready while
// its Pod is 0/1 Ready.
func readyVoters(o observed) int {
	ready := 0
	for _, m := range o.members {
		p, hasPod := o.pods[m.Name]
		if !m.IsLearner && m.Name != "" && o.healthy[m.ID] && hasPod && p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	return ready
}

// initializedCondition is True once etcd lists members: the cluster has
// formed.
func initializedCondition(o observed) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonBootstrapping, Message: "The cluster has not formed yet", ObservedGeneration: o.cluster.Generation}
	switch {
	case len(o.members) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, etcdv1alpha1.ReasonFormed, "The cluster has formed"
	case len(o.pods) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, etcdv1alpha1.ReasonUnreachable, fmt.Sprintf("No member answers: %v", o.etcdErr)
	}
	return cond
}

// readyCondition is True when the cluster has as many members as it
// wants, all ready voters; a refusal other than an upgrade's makes it
// False with the refusal's reason.
func readyCondition(o observed, a action) metav1.Condition {
	c := o.cluster
	want, ready := int(c.DesiredReplicas()), readyVoters(o)
	voters, _ := split(o.members)
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonNotReady,
		Message: fmt.Sprintf("%d of %d members are ready voters", ready, want), ObservedGeneration: c.Generation}
	if o.members == nil {
		cond.Reason, cond.Message = etcdv1alpha1.ReasonUnreachable, fmt.Sprintf("No member answers: %v", o.etcdErr)
	} else if ready == want && len(voters) == want && len(o.members) == want {
		cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonAllMembersReady
	} else if len(o.members) > want {
		// A surge (a roll adds the new member first) or a scale-down.
		cond.Message = fmt.Sprintf("%d ready voters, %d members for %d replicas: the extra ones leave one at a time", ready, len(o.members), want)
	}
	if a.kind == actRefuse && a.refusal != etcdv1alpha1.ReasonUpgradeRefused {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, a.refusal, a.reason
	}
	return cond
}

// progressingCondition is True while the pass takes a step, with the
// step's kind as reason; False when stable, refused or paused.
func progressingCondition(o observed, a action) metav1.Condition {
	c := o.cluster
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonStable, Message: "Membership matches spec.replicas", ObservedGeneration: c.Generation}
	if a.kind != actNone {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, string(a.kind), a.String()
	}
	if a.kind == actRefuse {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, a.refusal, a.reason
	}
	if c.IsPaused() {
		cond.Status, cond.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonPaused
		cond.Message = "The operator changes nothing while the annotation " + etcdv1alpha1.AnnotationPaused + " is \"true\"; it would now: " + a.String()
	}
	return cond
}

// annotatePod sets one annotation of pod by a merge patch of that
// annotation alone, so the kubelet's status updates do not conflict with
// it. A Pod that is gone is no error: the next pass sees it gone.
func (r *TopologyReconciler) annotatePod(ctx context.Context, pod *corev1.Pod, key, value string) error {
	patch := client.MergeFrom(pod.DeepCopy())
	pod = pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
	return client.IgnoreNotFound(r.Patch(ctx, pod, patch))
}
