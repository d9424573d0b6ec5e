// Package conditions computes the conditions of an EtcdCluster. Each
// function is pure: it reads the cluster (and what a reconciler observed) and
// returns one condition; reconcilers apply them.
package conditions

import (
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
	case claimsRefused != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, etcdv1alpha1.ReasonClaimsNotExpandable, claimsRefused
	}
	return c
}
