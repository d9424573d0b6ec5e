package builder

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// PodDisruptionBudget is the PodDisruptionBudget of the cluster's members,
// named after the cluster, or nil when spec.podDisruptionBudgetTemplate is
// not set (the reconciler then deletes the one it made before). Its bounds
// are those of the template (see PodDisruptionBudgetTemplate.DisruptionBudget):
// an empty template keeps a quorum of members available. Its labels are
// ClusterLabels plus those of the template (ours win) and its annotations
// those of the template.
func PodDisruptionBudget(c *etcdv1alpha1.EtcdCluster) *policyv1.PodDisruptionBudget {
	t := c.Spec.PodDisruptionBudgetTemplate
	if t == nil {
		return nil
	}
	minAvailable, maxUnavailable := t.DisruptionBudget(c.DesiredReplicas())
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: ObjectMeta(c, c.Name, t.EmbeddedObjectMetadata),
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: MemberSelectorLabels(c)},
			MinAvailable:   minAvailable,
			MaxUnavailable: maxUnavailable,
		},
	}
}
