package builder

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// wantPDB is the PodDisruptionBudget of newCluster(name) with the given
// bounds and no template metadata, written out.
func wantPDB(name string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       "ns",
			Labels:          wantLabels(name, nil),
			OwnerReferences: wantOwner(name),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"etcd.aenix.io/cluster": name}},
			MinAvailable:   minAvailable,
			MaxUnavailable: maxUnavailable,
		},
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	num := func(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }
	pct := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		want    *policyv1.PodDisruptionBudget
	}{
		{
			name:    "no template: no budget",
			cluster: newCluster("a").withReplicas(3).obj(),
			want:    nil,
		},
		{
			name:    "empty template, 1 replica: minAvailable 1",
			cluster: newCluster("a").withReplicas(1).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{}).obj(),
			want:    wantPDB("a", num(1), nil),
		},
		{
			name:    "empty template, 3 replicas: minAvailable 2",
			cluster: newCluster("a").withReplicas(3).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{}).obj(),
			want:    wantPDB("a", num(2), nil),
		},
		{
			name:    "empty template, 5 replicas: minAvailable 3",
			cluster: newCluster("a").withReplicas(5).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{}).obj(),
			want:    wantPDB("a", num(3), nil),
		},
		{
			name:    "empty template, replicas unset: quorum of the default 3",
			cluster: newCluster("a").withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{}).obj(),
			want:    wantPDB("a", num(2), nil),
		},
		{
			name:    "minAvailable number",
			cluster: newCluster("a").withReplicas(5).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{MinAvailable: num(4)}).obj(),
			want:    wantPDB("a", num(4), nil),
		},
		{
			name:    "minAvailable percentage",
			cluster: newCluster("a").withReplicas(5).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{MinAvailable: pct("60%")}).obj(),
			want:    wantPDB("a", pct("60%"), nil),
		},
		{
			name:    "maxUnavailable",
			cluster: newCluster("a").withReplicas(3).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: num(1)}).obj(),
			want:    wantPDB("a", nil, num(1)),
		},
		{
			name:    "both agreeing: minAvailable is used",
			cluster: newCluster("a").withReplicas(3).withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{MinAvailable: num(2), MaxUnavailable: num(1)}).obj(),
			want:    wantPDB("a", num(2), nil),
		},
		{
			name: "template labels and annotations, ours win",
			cluster: newCluster("a").withReplicas(3).withPDBMetadata(
				map[string]string{"team": "storage", "etcd.aenix.io/cluster": "b"},
				map[string]string{"note": "x"},
			).obj(),
			want: func() *policyv1.PodDisruptionBudget {
				p := wantPDB("a", num(2), nil)
				p.Labels["team"] = "storage"
				p.Annotations = map[string]string{"note": "x"}
				return p
			}(),
		},
		{
			name:    "cluster namespace",
			cluster: newCluster("a").withNamespace("tenants").withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{}).obj(),
			want: func() *policyv1.PodDisruptionBudget {
				p := wantPDB("a", num(2), nil)
				p.Namespace = "tenants"
				return p
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkEqual(t, PodDisruptionBudget(tt.cluster), tt.want)
		})
	}
}
