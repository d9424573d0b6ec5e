package builder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestBuildersShareNoMemoryWithCluster changes everything a builder returns
// and checks that the cluster it was built from did not change: callers
// (and server-side apply) may change built objects freely.
func TestBuildersShareNoMemoryWithCluster(t *testing.T) {
	t.Parallel()
	full := func() *etcdv1alpha1.EtcdCluster {
		meta := func() (map[string]string, map[string]string) {
			return map[string]string{"team": "storage"}, map[string]string{"note": "x"}
		}
		return newCluster("a").withReplicas(3).
			withServiceMetadata(meta()).
			withServiceSpec(corev1.ServiceSpec{
				Type:                     corev1.ServiceTypeLoadBalancer,
				LoadBalancerSourceRanges: []string{"10.0.0.0/8"},
				IPFamilies:               []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:           ptr.To(corev1.IPFamilyPolicySingleStack),
				Ports: []corev1.ServicePort{
					{Name: "client", Port: 12379, AppProtocol: ptr.To("h2c")},
					{Name: "metrics", Port: 2381, AppProtocol: ptr.To("http")},
				},
			}).
			withHeadlessServiceMetadata(meta()).
			withPDBMetadata(meta()).
			withPDB(etcdv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}).
			obj()
	}
	scribbleService := func(s *corev1.Service) {
		s.Labels["team"], s.Annotations["note"] = "changed", "changed"
		s.Spec.Selector["etcd.aenix.io/cluster"] = "changed"
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].Port++
			if s.Spec.Ports[i].AppProtocol != nil {
				*s.Spec.Ports[i].AppProtocol = "changed"
			}
		}
		for i := range s.Spec.LoadBalancerSourceRanges {
			s.Spec.LoadBalancerSourceRanges[i] = "changed"
		}
		for i := range s.Spec.IPFamilies {
			s.Spec.IPFamilies[i] = "changed"
		}
		if s.Spec.IPFamilyPolicy != nil {
			*s.Spec.IPFamilyPolicy = "changed"
		}
		*s.OwnerReferences[0].Controller = false
	}
	tests := []struct {
		name     string
		scribble func(*etcdv1alpha1.EtcdCluster)
	}{
		{"HeadlessService", func(c *etcdv1alpha1.EtcdCluster) { scribbleService(HeadlessService(c)) }},
		{"ClientService", func(c *etcdv1alpha1.EtcdCluster) { scribbleService(ClientService(c)) }},
		{"PodDisruptionBudget", func(c *etcdv1alpha1.EtcdCluster) {
			p := PodDisruptionBudget(c)
			p.Labels["team"], p.Annotations["note"] = "changed", "changed"
			p.Spec.Selector.MatchLabels["etcd.aenix.io/cluster"] = "changed"
			*p.Spec.MinAvailable = intstr.FromInt32(0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cluster := full()
			tt.scribble(cluster)
			checkEqual(t, cluster, full())
		})
	}
}
