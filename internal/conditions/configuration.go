// Package conditions computes the conditions of an EtcdCluster. Each
// function is pure: it reads the cluster (and what a reconciler observed) and
// returns one condition; reconcilers apply them.
package conditions

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// ConfigurationWarning tells the user about parts of an accepted spec that
// the operator ignores. The schema rejects what is wrong; this condition is
// for what is allowed but probably not meant. claimsRefused is why the
// members' claims could not grow to the template's size ("" when they
// could); it is reported unless the spec itself warns.
func ConfigurationWarning(cluster *etcdv1alpha1.EtcdCluster, claimsRefused string) metav1.Condition {
	c := metav1.Condition{
		Type:               etcdv1alpha1.ConditionConfigurationWarning,
		Status:             metav1.ConditionFalse,
		Reason:             etcdv1alpha1.ReasonNoWarnings,
		Message:            "Every field of the spec is in use",
		ObservedGeneration: cluster.Generation,
	}
	switch {
	case cluster.Spec.Storage.EmptyDirIgnored():
		c.Status = metav1.ConditionTrue
		c.Reason = etcdv1alpha1.ReasonEmptyDirIgnored
		c.Message = "spec.storage sets both emptyDir and volumeClaimTemplate: members use volumeClaimTemplate and emptyDir is ignored; remove spec.storage.emptyDir to silence this warning"
	case volumeTooSmall(cluster):
		size, _ := cluster.VolumeBytes()
		c.Status, c.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonVolumeTooSmall
		c.Message = fmt.Sprintf("spec.options' quota-backend-bytes and max-wals need a volume of at least %dMi per member (max-wals+1 write-ahead log files of 64 MB, and the database twice: a defragmentation writes a copy), and spec.storage gives %dMi: a member whose volume fills up crashes instead of raising etcd's NOSPACE alarm; make the volume larger, or lower quota-backend-bytes or max-wals (without quota-backend-bytes the operator sets one that fits)",
			mebibytes(cluster.VolumeNeeded()+1<<20-1), mebibytes(size))
	case claimsRefused != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, etcdv1alpha1.ReasonClaimsNotExpandable, claimsRefused
	}
	return c
}

// volumeTooSmall tells whether each member's volume is bounded and
// smaller than the database's quota and log files need.
func volumeTooSmall(cluster *etcdv1alpha1.EtcdCluster) bool {
	size, ok := cluster.VolumeBytes()
	return ok && size < cluster.VolumeNeeded()
}

func mebibytes(n int64) int64 { return n >> 20 }
