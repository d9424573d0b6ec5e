package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// restoreSource reads the EtcdBackup a new cluster restores
// (spec.bootstrap.restore.backupName); when it cannot be restored yet, a
// refusal says why, naming the field. A missing or unfinished source
// creates no Pod at all.
func restoreSource(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster, image string) (*etcdv1alpha1.EtcdBackup, *restoreRefusal, error) {
	name := c.Spec.Bootstrap.Restore.BackupName
	b := &etcdv1alpha1.EtcdBackup{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &restoreRefusal{etcdv1alpha1.ReasonSourceNotFound, fmt.Sprintf(
			"spec.bootstrap.restore.backupName: EtcdBackup %s not found in namespace %s: name a Succeeded EtcdBackup of this namespace; the cluster starts once it exists", name, c.Namespace)}, nil
	case err != nil:
		return nil, nil, err
	case b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.SHA256 == "" || b.Status.Key == "":
		phase := b.Status.Phase
		if phase == "" {
			phase = etcdv1alpha1.BackupPending
		}
		return nil, &restoreRefusal{etcdv1alpha1.ReasonSourceNotReady, fmt.Sprintf(
			"spec.bootstrap.restore.backupName: EtcdBackup %s is %s, not Succeeded: the cluster starts once it has succeeded", name, phase)}, nil
	case image == "":
		return nil, &restoreRefusal{etcdv1alpha1.ReasonRestoreImageless,
			"the operator does not know its own image (environment variable OPERATOR_IMAGE), which the restoring seed runs: set it in the operator's Deployment"}, nil
	}
	return b, nil, nil
}

// restoredCondition is the Restored condition of a cluster created with
// spec.bootstrap.restore (ok false for others): True once the cluster
// formed, False when the source cannot be restored or the seed's restore
// failed (its result's reason and message), Unknown meanwhile.
func restoredCondition(o observed) (metav1.Condition, bool) {
	c := o.cluster
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil {
		return metav1.Condition{}, false
	}
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionRestored, Status: metav1.ConditionUnknown, Reason: etcdv1alpha1.ReasonRestoring, ObservedGeneration: c.Generation}
	name := c.Spec.Bootstrap.Restore.BackupName
	switch {
	case c.Status.ClusterID != "" || o.clusterID != 0:
		if old := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionRestored); old != nil && old.Status == metav1.ConditionTrue {
			return *old, true // the restore is history: its message stays
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonRestored
		cond.Message = fmt.Sprintf("The cluster was restored from EtcdBackup %s", name)
		if b := o.restore; b != nil {
			cond.Message = fmt.Sprintf("The cluster was restored from EtcdBackup %s: revision %d, %d bytes, sha256 %s, from %s", name, b.Status.Revision, b.Status.Size, b.Status.SHA256, b.Status.Location)
		}
	case o.restoreProblem != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, o.restoreProblem.reason, o.restoreProblem.message
	default:
		cond.Message = fmt.Sprintf("The seed restores the snapshot of EtcdBackup %s", name)
		if res, failed := seedRestoreFailure(o); failed {
			cond.Status, cond.Reason = metav1.ConditionFalse, res.Reason
			cond.Message = fmt.Sprintf("The seed's restore of EtcdBackup %s failed, nothing started from it; it is retried with back-off: %s", name, res.Message)
		}
	}
	return cond, true
}

// seedRestoreFailure is the result the seed's restore container left when
// it last failed.
func seedRestoreFailure(o observed) (backup.Result, bool) {
	for _, p := range o.pods {
		if p.Annotations[etcdv1alpha1.AnnotationRestoredFrom] == "" {
			continue
		}
		if res, failed := restoreFailure(p); failed {
			return res, true
		}
	}
	return backup.Result{}, false
}

// restoreFailure is the result the restore container of seed Pod p left
// when it last failed.
func restoreFailure(p *corev1.Pod) (backup.Result, bool) {
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name != builder.RestoreContainer {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t == nil || t.ExitCode == 0 {
				continue
			}
			res, err := backup.ParseResult(t.Message)
			if err != nil {
				return backup.Result{Reason: etcdv1alpha1.ReasonRestoring, Message: backup.LastLines(t.Message, 1)}, true
			}
			return res, true
		}
	}
	return backup.Result{}, false
}
