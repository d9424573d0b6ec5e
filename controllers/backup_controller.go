package controllers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// BackupReconciler takes EtcdBackups: for each attempt it creates a runner
// Pod (the operator's image, `manager backup run`), reads the result the
// runner leaves as its termination message, and writes it to the status;
// failed attempts are retried with back-off. The operator process itself
// never streams a snapshot nor holds store credentials.
type BackupReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// Pods reads the runner Pods (NewBackupPodsCache): the manager's cache
	// holds only Pods of clusters.
	Pods client.Reader
	// Image is the operator's image, which the runner Pods run.
	Image string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Timing of backups.
const (
	// backupRetryBase doubles with every failed attempt, up to backupRetryMax.
	backupRetryBase = 10 * time.Second
	backupRetryMax  = 5 * time.Minute
	// backupPendingRecheck is how soon a backup that waits for its
	// cluster, a Secret or a claim looks again.
	backupPendingRecheck = 15 * time.Second
	// backupDeadlineGrace is how long past spec.timeout a runner Pod that
	// has not ended (its node is gone, say) is given before it is deleted
	// and the attempt counted as timed out.
	backupDeadlineGrace = 30 * time.Second
)

// Reasons of an EtcdBackup's Succeeded condition set by the operator (the
// runner's are in internal/backup).
const (
	reasonBackupPending     = "Pending"
	reasonBackupRunning     = "Running"
	reasonClusterNotFound   = "ClusterNotFound"
	reasonClusterNotReady   = "ClusterNotReady"
	reasonSecretNotFound    = "SecretNotFound"
	reasonSecretInvalid     = "SecretInvalid"
	reasonClaimNotFound     = "ClaimNotFound"
	reasonNoOperatorImage   = "OperatorImageUnknown"
	reasonBackupTimeout     = "Timeout"
	reasonRunnerFailed      = "RunnerFailed"
	reasonDeleteFailed      = "DeleteFailed"
	eventBackupStarted      = "BackupStarted"
	eventBackupSucceeded    = "BackupSucceeded"
	eventBackupFailed       = "BackupFailed"
	eventBackupGaveUp       = "BackupGaveUp"
	eventBackupSnapshotGone = "SnapshotDeleted"
)

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// Reconcile moves one backup on by a step.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "backup", err) }()
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	defer func() { r.recordBackupMetrics(ctx, b) }()
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, b)
	}
	if b.Spec.DeletionPolicy == etcdv1alpha1.BackupDelete && controllerutil.AddFinalizer(b, etcdv1alpha1.FinalizerBackup) {
		if err := r.Update(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	// A failed attempt's Pod stays, ended, for `kubectl logs`, until the
	// backup succeeds; a backup that gave up keeps its last one.
	switch b.Status.Phase {
	case etcdv1alpha1.BackupSucceeded:
		return ctrl.Result{}, r.deleteRunners(ctx, b, "")
	case etcdv1alpha1.BackupFailed:
		return ctrl.Result{}, r.deleteRunners(ctx, b, builder.BackupPodName(b, b.Status.Attempts))
	}

	// The attempt in flight is the status's: an attempt is recorded
	// (conflict-checked) before its Pod is created, so two passes, one of
	// them on a stale cache, never start two Pods for one backup. Only a
	// Running attempt's Pod is followed: a Retrying backup's status holds
	// the result of its last Pod already.
	n := b.Status.Attempts
	if n > 0 && b.Status.Phase == etcdv1alpha1.BackupRunning {
		pod, err := r.runnerPod(ctx, b, n)
		if err != nil {
			return ctrl.Result{}, err
		}
		if pod != nil {
			return r.follow(ctx, b, n, pod)
		}
	}
	if b.Status.Phase == etcdv1alpha1.BackupRunning && n > 0 {
		// Recorded, but its Pod is not there: the operator stopped before
		// creating it, or the cache has not seen it yet.
		runner, cond := r.prepare(ctx, b, n)
		if runner == nil {
			return r.pending(ctx, b, cond)
		}
		return r.startRunner(ctx, b, n, runner)
	}
	if next := b.Status.NextAttemptTime; b.Status.Phase == etcdv1alpha1.BackupRetrying && next != nil && r.now().Before(next.Time) {
		return ctrl.Result{RequeueAfter: next.Sub(r.now())}, nil
	}
	runner, cond := r.prepare(ctx, b, n+1)
	if runner == nil {
		return r.pending(ctx, b, cond)
	}
	status := b.Status.DeepCopy()
	status.Attempts, status.Phase, status.NextAttemptTime = n+1, etcdv1alpha1.BackupRunning, nil
	if status.StartTime == nil {
		status.StartTime = &metav1.Time{Time: r.now()}
	}
	meta.SetStatusCondition(&status.Conditions, runningCondition(n+1, builder.BackupPodName(b, n+1)))
	b.Status = *status
	if err := r.Status().Update(ctx, b); err != nil {
		return ctrl.Result{}, err // a conflict: another pass, or a stale cache
	}
	return r.startRunner(ctx, b, n+1, runner)
}

// pending says, in cond, what the next attempt waits for; a backup that
// never started is Pending.
func (r *BackupReconciler) pending(ctx context.Context, b *etcdv1alpha1.EtcdBackup, cond metav1.Condition) (ctrl.Result, error) {
	status := b.Status.DeepCopy()
	if status.Phase == "" {
		status.Phase = etcdv1alpha1.BackupPending
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	return ctrl.Result{RequeueAfter: backupPendingRecheck}, r.writeBackupStatus(ctx, b, status)
}

// startRunner creates runner, the Pod of attempt n, recorded in b's
// status. A Pod of that name that b does not own (a member named like it)
// is refused.
func (r *BackupReconciler) startRunner(ctx context.Context, b *etcdv1alpha1.EtcdBackup, n int32, runner *corev1.Pod) (ctrl.Result, error) {
	err := r.Create(ctx, runner)
	if apierrors.IsAlreadyExists(err) {
		existing, err := r.ownPod(ctx, b, runner.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if existing == nil {
			return ctrl.Result{}, fmt.Errorf("a Pod %s that is not this backup's exists: delete it or rename the backup", runner.Name)
		}
		return ctrl.Result{RequeueAfter: backupPendingRecheck}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("creating the runner Pod %s: %w", runner.Name, err)
	}
	r.event(b, corev1.EventTypeNormal, eventBackupStarted, "Attempt %d started in Pod %s", n, runner.Name)
	return ctrl.Result{RequeueAfter: time.Duration(b.TimeoutSeconds())*time.Second + backupDeadlineGrace}, nil
}

func runningCondition(n int32, pod string) metav1.Condition {
	return metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionUnknown, Reason: reasonBackupRunning,
		Message: fmt.Sprintf("attempt %d runs in Pod %s", n, pod)}
}

// follow looks at the runner Pod of attempt n: while it runs, the backup
// is Running; once it ended, its result goes into the status, and only
// then is a successful Pod deleted (a crash in between reads the same Pod
// again). A failed one stays for its log.
func (r *BackupReconciler) follow(ctx context.Context, b *etcdv1alpha1.EtcdBackup, n int32, pod *corev1.Pod) (ctrl.Result, error) {
	status := b.Status.DeepCopy()
	status.Attempts = max(status.Attempts, n)
	if status.StartTime == nil {
		status.StartTime = &pod.CreationTimestamp
	}
	res, ended := runnerResult(b, pod, r.now())
	if !ended {
		status.Phase = etcdv1alpha1.BackupRunning
		meta.SetStatusCondition(&status.Conditions, runningCondition(n, pod.Name))
		deadline := pod.CreationTimestamp.Add(time.Duration(b.TimeoutSeconds())*time.Second + backupDeadlineGrace)
		return ctrl.Result{RequeueAfter: max(time.Second, deadline.Sub(r.now()))}, r.writeBackupStatus(ctx, b, status)
	}
	now := metav1.Time{Time: r.now()}
	var wait time.Duration
	// Said once the status holds the result: a pass that fails to write it
	// reads the same Pod again and must not count it twice.
	var eventType, reason, message, result string
	switch {
	case res.Succeeded():
		status.Phase, status.CompletionTime, status.NextAttemptTime = etcdv1alpha1.BackupSucceeded, &now, nil
		status.Key, status.Size, status.SHA256, status.Revision = res.Key, res.Size, res.SHA256, res.Revision
		status.Location = res.Location
		status.Member, status.ClusterID, status.EtcdVersion = res.Member, res.ClusterID, res.Version
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionTrue, Reason: backup.ReasonVerified,
			Message: fmt.Sprintf("revision %d from member %s, %d bytes, sha256 %s, stored at %s and read back", res.Revision, res.Member, res.Size, res.SHA256, status.Location)})
		eventType, reason, result = corev1.EventTypeNormal, eventBackupSucceeded, "succeeded"
		message = fmt.Sprintf("Revision %d from member %s, %d bytes, at %s", res.Revision, res.Member, res.Size, status.Location)
	case n > b.BackoffLimitOrDefault():
		status.Phase, status.CompletionTime, status.NextAttemptTime = etcdv1alpha1.BackupFailed, &now, nil
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionFalse, Reason: res.Reason,
			Message: fmt.Sprintf("gave up after %d attempts; the last: %s", n, res.Message)})
		eventType, reason, result = corev1.EventTypeWarning, eventBackupGaveUp, "failed"
		message = fmt.Sprintf("Gave up after %d attempts: %s (kubectl logs %s)", n, res.Message, pod.Name)
	default:
		wait = min(backupRetryBase<<(n-1), backupRetryMax)
		status.Phase, status.NextAttemptTime = etcdv1alpha1.BackupRetrying, &metav1.Time{Time: now.Add(wait)}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionUnknown, Reason: res.Reason,
			Message: fmt.Sprintf("attempt %d failed, attempt %d starts in %s: %s", n, n+1, wait.Round(time.Second), res.Message)})
		eventType, reason, result = corev1.EventTypeWarning, eventBackupFailed, "failed"
		message = fmt.Sprintf("Attempt %d failed: %s (kubectl logs %s)", n, res.Message, pod.Name)
	}
	if err := r.writeBackupStatus(ctx, b, status); err != nil {
		return ctrl.Result{}, err
	}
	r.event(b, eventType, reason, "%s", message)
	backupAttempts.WithLabelValues(b.Namespace, b.Spec.ClusterName, result).Inc()
	// A Pod past its deadline may still run: it goes too.
	if finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed; res.Succeeded() || !finished {
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// runnerResult is the result of the runner Pod pod, and whether it ended:
// its termination message when it wrote one for the key b expects; a
// timeout when it ran past spec.timeout; a RunnerFailed result otherwise.
func runnerResult(b *etcdv1alpha1.EtcdBackup, pod *corev1.Pod, now time.Time) (backup.Result, bool) {
	key := b.SnapshotKey()
	failed := func(reason, format string, args ...any) backup.Result {
		return backup.Result{Reason: reason, Key: key, Message: fmt.Sprintf(format, args...)}
	}
	var term *corev1.ContainerStateTerminated
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "backup" && s.State.Terminated != nil {
			term = s.State.Terminated
		}
	}
	ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || term != nil
	// Each Pod runs to its own deadline: spec.timeout for an attempt, a
	// fixed one for the removal of the snapshot.
	limit, what := b.TimeoutSeconds(), "spec.timeout: the attempt"
	if pod.Name == builder.DeleteBackupPodName(b) {
		limit, what = builder.DeleteBackupTimeout, "the removal of the snapshot"
	}
	if !ended {
		if now.After(pod.CreationTimestamp.Add(time.Duration(limit)*time.Second + backupDeadlineGrace)) {
			return failed(reasonBackupTimeout, "%s did not end within %ds (Pod %s is %s)", what, limit, pod.Name, pod.Status.Phase), true
		}
		return backup.Result{}, false
	}
	if pod.Status.Reason == "DeadlineExceeded" {
		return failed(reasonBackupTimeout, "%s did not end within %ds", what, limit), true
	}
	if term == nil {
		return failed(reasonRunnerFailed, "Pod %s ended (%s) without a result: %s", pod.Name, pod.Status.Phase, pod.Status.Message), true
	}
	res, err := backup.ParseResult(term.Message)
	switch {
	case err != nil:
		return failed(reasonRunnerFailed, "Pod %s exited with code %d without a result: %s", pod.Name, term.ExitCode, backup.LastLines(term.Message, 1)), true
	case res.Key != key:
		return failed(reasonRunnerFailed, "Pod %s reported a result for key %s, want %s", pod.Name, res.Key, key), true
	case res.Succeeded() && term.ExitCode != 0:
		return failed(reasonRunnerFailed, "Pod %s exited with code %d after reporting success", pod.Name, term.ExitCode), true
	}
	return res, true
}

// snapshotPlace is where b's snapshot is, as its runner said, for a
// message that may come before any runner said so.
func snapshotPlace(b *etcdv1alpha1.EtcdBackup) string {
	if b.Status.Location != "" {
		return b.Status.Location
	}
	return "key " + b.SnapshotKey() + " of spec.destination"
}

// prepare checks what attempt n needs before it starts (the cluster and
// its members, the Secrets and claim of the destination, the operator's
// image) and returns its runner Pod; or nil and a Pending condition that
// says what is missing. Missing inputs use up no attempt.
func (r *BackupReconciler) prepare(ctx context.Context, b *etcdv1alpha1.EtcdBackup, n int32) (*corev1.Pod, metav1.Condition) {
	pending := func(reason, format string, args ...any) (*corev1.Pod, metav1.Condition) {
		return nil, metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionUnknown, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if r.Image == "" {
		return pending(reasonNoOperatorImage, "the operator does not know its own image (environment variable OPERATOR_IMAGE), which takes the snapshot: set it in the operator's Deployment")
	}
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return pending(reasonClusterNotFound, "spec.clusterName: EtcdCluster %s not found in namespace %s", b.Spec.ClusterName, b.Namespace)
		}
		return pending(reasonClusterNotFound, "spec.clusterName: reading EtcdCluster %s: %v", b.Spec.ClusterName, err)
	}
	pods, err := memberPods(ctx, r.Client, c)
	if err != nil {
		return pending(reasonClusterNotReady, "listing the members of %s: %v", c.Name, err)
	}
	if len(pods) == 0 || c.Status.ClusterID == "" {
		return pending(reasonClusterNotReady, "spec.clusterName: EtcdCluster %s has not formed yet; the backup starts once it has", c.Name)
	}
	if s := b.Spec.Destination.S3; s != nil {
		if cond, ok := r.checkSecret(ctx, b.Namespace, "spec.destination.s3.credentialsSecret", s.CredentialsSecret.Name, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"); !ok {
			return nil, cond
		}
		if ca := s.CASecret; ca != nil {
			key := ca.Key
			if key == "" {
				key = builder.CAKey
			}
			if cond, ok := r.checkSecret(ctx, b.Namespace, "spec.destination.s3.caSecret", ca.Name, key); !ok {
				return nil, cond
			}
		}
	}
	if v := b.Spec.Destination.Volume; v != nil {
		claim := &corev1.PersistentVolumeClaim{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: v.ClaimName}, claim); err != nil {
			return pending(reasonClaimNotFound, "spec.destination.volume.claimName: PersistentVolumeClaim %s not found in namespace %s: create it", v.ClaimName, b.Namespace)
		}
	}
	var dbSize int64
	for _, m := range c.Status.Members {
		dbSize = max(dbSize, m.DBSize)
	}
	return builder.BackupRunnerPod(b, c, r.Image, n, memberURLs(c, podNames(pods)), builder.BackupScratchSize(dbSize)), metav1.Condition{}
}

// checkSecret makes sure Secret name holds keys; when not, the Pending
// condition names field.
func (r *BackupReconciler) checkSecret(ctx context.Context, namespace, field, name string, keys ...string) (metav1.Condition, bool) {
	s := &corev1.Secret{}
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionBackupSucceeded, Status: metav1.ConditionUnknown}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		cond.Reason, cond.Message = reasonSecretNotFound, fmt.Sprintf("%s.name: Secret %s not found in namespace %s: create it with the keys %v", field, name, namespace, keys)
		return cond, false
	}
	for _, k := range keys {
		if len(s.Data[k]) == 0 {
			cond.Reason, cond.Message = reasonSecretInvalid, fmt.Sprintf("%s: Secret %s has no %s: add it", field, name, k)
			return cond, false
		}
	}
	return cond, true
}

// runnerPod is the runner Pod of attempt n, nil when there is none.
func (r *BackupReconciler) runnerPod(ctx context.Context, b *etcdv1alpha1.EtcdBackup, n int32) (*corev1.Pod, error) {
	return r.ownPod(ctx, b, builder.BackupPodName(b, n))
}

func (r *BackupReconciler) ownPod(ctx context.Context, b *etcdv1alpha1.EtcdBackup, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := r.Pods.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, pod)
	if apierrors.IsNotFound(err) || err == nil && !metav1.IsControlledBy(pod, b) {
		return nil, nil
	}
	return pod, err
}

// deleteRunners deletes b's Pods but keep.
func (r *BackupReconciler) deleteRunners(ctx context.Context, b *etcdv1alpha1.EtcdBackup, keep string) error {
	pods := &corev1.PodList{}
	if err := r.Pods.List(ctx, pods, client.InNamespace(b.Namespace), client.MatchingLabels{builder.LabelBackup: b.Name}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Name == keep || !metav1.IsControlledBy(p, b) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// finalize removes a deleted backup's snapshot when its deletionPolicy is
// Delete, through a Pod as the runner does, then lets the backup go. A
// snapshot another backup stored at the same key is never removed: the
// Pod checks the backup UID in the snapshot's metadata.
func (r *BackupReconciler) finalize(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, etcdv1alpha1.FinalizerBackup) {
		return ctrl.Result{}, nil
	}
	name := builder.DeleteBackupPodName(b)
	if b.Spec.DeletionPolicy == etcdv1alpha1.BackupDelete && b.Status.Attempts > 0 {
		// A cluster that has not formed yet may be restoring it.
		protected, err := restoreSources(ctx, r.Client, b.Namespace)
		if err != nil {
			return ctrl.Result{}, err
		}
		if protected[b.Name] {
			r.event(b, corev1.EventTypeWarning, reasonDeleteFailed, "The snapshot is kept while a cluster being restored from it has not formed")
			return ctrl.Result{RequeueAfter: backupPendingRecheck}, nil
		}
		// No runner may store after the removal looked: they go first.
		if left, err := r.runnersLeft(ctx, b, name); err != nil || left {
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
		pod, err := r.ownPod(ctx, b, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if pod == nil {
			if r.Image == "" {
				return ctrl.Result{RequeueAfter: backupPendingRecheck}, nil
			}
			err := r.Create(ctx, builder.DeleteBackupPod(b, r.Image))
			switch {
			case apierrors.IsForbidden(err) && namespaceTerminating(err):
				// Nothing can run here any more: let the backup go, and
				// say where its snapshot stays.
				r.event(b, corev1.EventTypeWarning, reasonDeleteFailed, "The namespace is being deleted, so nothing can remove the snapshot: it stays at %s", snapshotPlace(b))
				return ctrl.Result{}, r.dropFinalizer(ctx, b)
			case err != nil && !apierrors.IsAlreadyExists(err):
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: backupPendingRecheck}, nil
		}
		res, ended := runnerResult(b, pod, r.now())
		if !ended {
			return ctrl.Result{RequeueAfter: backupPendingRecheck}, nil
		}
		if !res.Succeeded() {
			r.event(b, corev1.EventTypeWarning, reasonDeleteFailed, "Removing the snapshot failed, retrying: %s", res.Message)
			return ctrl.Result{RequeueAfter: backupRetryMax / 5}, client.IgnoreNotFound(r.Delete(ctx, pod))
		}
		r.event(b, corev1.EventTypeNormal, eventBackupSnapshotGone, "Removed the snapshot at %s", cmp.Or(res.Location, snapshotPlace(b)))
	}
	return ctrl.Result{}, r.dropFinalizer(ctx, b)
}

func (r *BackupReconciler) dropFinalizer(ctx context.Context, b *etcdv1alpha1.EtcdBackup) error {
	controllerutil.RemoveFinalizer(b, etcdv1alpha1.FinalizerBackup)
	return r.Update(ctx, b)
}

// runnersLeft deletes b's runner Pods (all but keep) and tells whether
// any is still there.
func (r *BackupReconciler) runnersLeft(ctx context.Context, b *etcdv1alpha1.EtcdBackup, keep string) (bool, error) {
	if err := r.deleteRunners(ctx, b, keep); err != nil {
		return true, err
	}
	pods := &corev1.PodList{}
	if err := r.Pods.List(ctx, pods, client.InNamespace(b.Namespace), client.MatchingLabels{builder.LabelBackup: b.Name}); err != nil {
		return true, err
	}
	for _, p := range pods.Items {
		if p.Name != keep && metav1.IsControlledBy(&p, b) {
			return true, nil
		}
	}
	return false, nil
}

// namespaceTerminating tells whether a refusal to create is the API
// server's "namespace is being terminated".
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

func (r *BackupReconciler) writeBackupStatus(ctx context.Context, b *etcdv1alpha1.EtcdBackup, status *etcdv1alpha1.EtcdBackupStatus) error {
	if equality.Semantic.DeepEqual(&b.Status, status) {
		return nil
	}
	b.Status = *status
	return r.Status().Update(ctx, b)
}

func (r *BackupReconciler) event(b *etcdv1alpha1.EtcdBackup, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(b, nil, eventType, reason, "Backup", format, args...)
	}
}

func (r *BackupReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// recordBackupMetrics sets the last-success series of b's cluster from
// the EtcdBackups themselves, so a restart of the operator loses nothing.
func (r *BackupReconciler) recordBackupMetrics(ctx context.Context, b *etcdv1alpha1.EtcdBackup) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		return
	}
	var last *etcdv1alpha1.EtcdBackup
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.ClusterName != b.Spec.ClusterName || o.Status.Phase != etcdv1alpha1.BackupSucceeded || o.Status.CompletionTime == nil {
			continue
		}
		if last == nil || o.Status.CompletionTime.After(last.Status.CompletionTime.Time) {
			last = o
		}
	}
	if last == nil {
		backupLastSuccess.DeleteLabelValues(b.Namespace, b.Spec.ClusterName)
		backupLastSize.DeleteLabelValues(b.Namespace, b.Spec.ClusterName)
		return
	}
	backupLastSuccess.WithLabelValues(b.Namespace, b.Spec.ClusterName).Set(float64(last.Status.CompletionTime.Unix()))
	backupLastSize.WithLabelValues(b.Namespace, b.Spec.ClusterName).Set(float64(last.Status.Size))
}

// NewBackupPodsCache starts, with the manager, a cache of the Pods of
// EtcdBackups (those labelled etcd.aenix.io/backup) in namespaces (nil for
// all): the manager's cache holds only Pods of clusters.
func NewBackupPodsCache(mgr ctrl.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	has, err := labels.NewRequirement(builder.LabelBackup, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: maps.Clone(namespaces),
		ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: labels.NewSelector().Add(*has)}},
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// SetupWithManager watches EtcdBackups and their Pods (through pods, a
// NewBackupPodsCache).
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager, pods cache.Cache) error {
	r.Pods = pods
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackup{}).
		WatchesRawSource(source.Kind(pods, client.Object(&corev1.Pod{}),
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &etcdv1alpha1.EtcdBackup{}, handler.OnlyControllerOwner()))).
		Named("etcdbackup").
		Complete(r)
}
