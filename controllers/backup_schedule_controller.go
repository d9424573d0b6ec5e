package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// BackupScheduleReconciler takes the backups of EtcdBackupSchedules: at
// each scheduled time it creates an EtcdBackup (the BackupReconciler
// takes it), never two at once, and deletes the backups the retention no
// longer keeps. It re-derives everything from the schedule's status and
// its backups at every pass.
type BackupScheduleReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reasons and events of an EtcdBackupSchedule.
const (
	reasonScheduled       = "Scheduled"
	reasonInvalidSchedule = "InvalidSchedule"
	eventBackupCreated    = "BackupCreated"
	eventBackupSkipped    = "BackupSkipped"
	eventBackupPruned     = "BackupPruned"
)

// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackupschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.aenix.io,resources=etcdbackups,verbs=create;delete

// Reconcile runs one schedule's due backup and its retention.
func (r *BackupScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	defer func() { countError(req.Namespace, req.Name, "backup-schedule", err) }()
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	status := s.Status.DeepCopy()
	now := r.now()
	sched, err := parseSchedule(s)
	if err != nil {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionScheduleReady, Status: metav1.ConditionFalse, Reason: reasonInvalidSchedule, Message: err.Error(), ObservedGeneration: s.Generation})
		status.NextScheduleTime = nil
		return ctrl.Result{}, r.writeStatus(ctx, s, status)
	}

	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{etcdv1alpha1.LabelBackupSchedule: s.Name}); err != nil {
		return ctrl.Result{}, err
	}
	active, pending := "", ""
	status.LastSuccessfulTime, status.LastBackup = nil, ""
	for _, b := range list.Items {
		switch b.Status.Phase {
		case etcdv1alpha1.BackupSucceeded:
			if status.LastSuccessfulTime == nil || completion(b).After(status.LastSuccessfulTime.Time) {
				status.LastSuccessfulTime, status.LastBackup = &metav1.Time{Time: completion(b)}, b.Name
			}
		case etcdv1alpha1.BackupFailed:
		case etcdv1alpha1.BackupPending, "":
			if b.DeletionTimestamp.IsZero() {
				pending = b.Name
			}
		default:
			if b.DeletionTimestamp.IsZero() {
				active = b.Name
			}
		}
	}

	cluster := &etcdv1alpha1.EtcdCluster{}
	clusterErr := r.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.ClusterName}, cluster)
	if clusterErr != nil && !apierrors.IsNotFound(clusterErr) {
		return ctrl.Result{}, clusterErr
	}
	ready := metav1.Condition{Type: etcdv1alpha1.ConditionScheduleReady, Status: metav1.ConditionTrue, Reason: reasonScheduled, ObservedGeneration: s.Generation}
	last := s.CreationTimestamp.Time
	if status.LastScheduleTime != nil {
		last = status.LastScheduleTime.Time
	}
	due, next := dueRun(sched, last, now)
	switch {
	case apierrors.IsNotFound(clusterErr):
		ready.Status, ready.Reason = metav1.ConditionFalse, reasonClusterNotFound
		ready.Message = fmt.Sprintf("spec.clusterName: EtcdCluster %s not found in namespace %s: no backup is taken until it exists", s.Spec.ClusterName, s.Namespace)
	case next.IsZero():
		ready.Status, ready.Reason = metav1.ConditionFalse, reasonInvalidSchedule
		ready.Message = fmt.Sprintf("spec.schedule: %q never fires (no such date): give a date that exists", s.Spec.Schedule)
	case due.IsZero(), s.Spec.Suspend:
		// Nothing due, or suspended: a run missed while suspended is made
		// up once the schedule resumes (lastScheduleTime stays).
	case active != "" && active != scheduledBackupName(s, due):
		status.LastScheduleTime = &metav1.Time{Time: due}
		r.event(s, corev1.EventTypeNormal, eventBackupSkipped, "Skipped the backup of %s: backup %s still runs", due.UTC().Format(time.RFC3339), active)
	default:
		// A backup that never started (it waits for a Secret, say) gives
		// way to the next run rather than hold the schedule up.
		if pending != "" && pending != scheduledBackupName(s, due) {
			old := &etcdv1alpha1.EtcdBackup{}
			old.Namespace, old.Name = s.Namespace, pending
			if err := r.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			r.event(s, corev1.EventTypeWarning, eventBackupSkipped, "Deleted backup %s, which never started (see its conditions), for the run of %s", pending, due.UTC().Format(time.RFC3339))
		}
		b := r.scheduledBackup(s, due)
		if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating backup %s: %w", b.Name, err)
		} else if err == nil {
			r.event(s, corev1.EventTypeNormal, eventBackupCreated, "Created backup %s for %s", b.Name, due.UTC().Format(time.RFC3339))
		}
		status.LastScheduleTime, active = &metav1.Time{Time: due}, b.Name
	}
	if active == "" {
		active = pending
	}
	if ready.Status == metav1.ConditionTrue {
		ready.Message = fmt.Sprintf("next backup at %s", next.UTC().Format(time.RFC3339))
		if s.Spec.Suspend {
			ready.Message = "suspended: no new backups; retention still runs"
		}
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	status.ActiveBackup, status.NextScheduleTime = active, nil
	if !next.IsZero() {
		status.NextScheduleTime = &metav1.Time{Time: next}
	}

	protected, err := restoreSources(ctx, r.Client, s.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, name := range backupsToPrune(list.Items, s.Spec.Retention, now, protected) {
		b := &etcdv1alpha1.EtcdBackup{}
		b.Namespace, b.Name = s.Namespace, name
		if err := r.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.event(s, corev1.EventTypeNormal, eventBackupPruned, "Deleted backup %s and its snapshot: the retention keeps it no longer", name)
	}
	if err := r.writeStatus(ctx, s, status); err != nil {
		return ctrl.Result{}, err
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(time.Second, next.Sub(now))}, nil
}

// scheduledBackup is the backup of schedule s at scheduled time t: not
// owned by the schedule (it outlives it), removed with its snapshot when
// the retention deletes it.
func (r *BackupScheduleReconciler) scheduledBackup(s *etcdv1alpha1.EtcdBackupSchedule, t time.Time) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      scheduledBackupName(s, t),
			Labels:    map[string]string{etcdv1alpha1.LabelBackupSchedule: s.Name},
		},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterName:    s.Spec.ClusterName,
			Destination:    *s.Spec.Destination.DeepCopy(),
			DeletionPolicy: etcdv1alpha1.BackupDelete,
			Timeout:        s.Spec.Timeout,
			BackoffLimit:   s.Spec.BackoffLimit,
		},
	}
}

// restoreSources are the backups that clusters not formed yet restore:
// the retention keeps them.
func restoreSources(ctx context.Context, reader client.Reader, namespace string) (map[string]bool, error) {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := reader.List(ctx, clusters, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range clusters.Items {
		if b := c.Spec.Bootstrap; b != nil && b.Restore != nil && c.Status.ClusterID == "" {
			out[b.Restore.BackupName] = true
		}
	}
	return out, nil
}

func (r *BackupScheduleReconciler) writeStatus(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, status *etcdv1alpha1.EtcdBackupScheduleStatus) error {
	if equality.Semantic.DeepEqual(&s.Status, status) {
		return nil
	}
	s.Status = *status
	return r.Status().Update(ctx, s)
}

func (r *BackupScheduleReconciler) event(s *etcdv1alpha1.EtcdBackupSchedule, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, eventType, reason, "Schedule", format, args...)
	}
}

func (r *BackupScheduleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager watches schedules and the backups they create.
func (r *BackupScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackupSchedule{}).
		Watches(&etcdv1alpha1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.GetLabels()[etcdv1alpha1.LabelBackupSchedule]; name != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
			}
			return nil
		})).
		Named("etcdbackupschedule").
		Complete(r)
}
