package builder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// wantHeadlessService is the headless Service of newCluster(name) without a
// template, written out.
func wantHeadlessService(name string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name + "-headless",
			Namespace:       "ns",
			Labels:          wantLabels(name, nil),
			OwnerReferences: wantOwner(name),
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                "None",
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"etcd.aenix.io/cluster": name},
			Ports: []corev1.ServicePort{
				{Name: "peer", Protocol: corev1.ProtocolTCP, Port: 2380, TargetPort: intstr.FromString("peer")},
				{Name: "client", Protocol: corev1.ProtocolTCP, Port: 2379, TargetPort: intstr.FromString("client")},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 2381, TargetPort: intstr.FromString("metrics")},
			},
		},
	}
}

func TestHeadlessService(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		// want changes wantHeadlessService("a").
		want func(*corev1.Service)
	}{
		{
			name:    "no template",
			cluster: newCluster("a").obj(),
			want:    func(*corev1.Service) {},
		},
		{
			name:    "replicas do not matter",
			cluster: newCluster("a").withReplicas(5).obj(),
			want:    func(*corev1.Service) {},
		},
		{
			name:    "cluster namespace",
			cluster: newCluster("a").withNamespace("tenants").obj(),
			want:    func(s *corev1.Service) { s.Namespace = "tenants" },
		},
		{
			name:    "empty template",
			cluster: newCluster("a").withHeadlessServiceMetadata(nil, nil).obj(),
			want:    func(*corev1.Service) {},
		},
		{
			name: "template labels and annotations",
			cluster: newCluster("a").withHeadlessServiceMetadata(
				map[string]string{"team": "storage"},
				map[string]string{"service.kubernetes.io/topology-mode": "Auto"},
			).obj(),
			want: func(s *corev1.Service) {
				s.Labels["team"] = "storage"
				s.Annotations = map[string]string{"service.kubernetes.io/topology-mode": "Auto"}
			},
		},
		{
			name: "our labels win over the template's",
			cluster: newCluster("a").withHeadlessServiceMetadata(
				map[string]string{"etcd.aenix.io/cluster": "b", "app.kubernetes.io/name": "x", "team": "storage"}, nil,
			).obj(),
			want: func(s *corev1.Service) { s.Labels["team"] = "storage" },
		},
		{
			name:    "client Service template does not touch the headless Service",
			cluster: newCluster("a").withServiceMetadata(map[string]string{"team": "storage"}, map[string]string{"note": "x"}).withServiceSpec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}).obj(),
			want:    func(*corev1.Service) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := wantHeadlessService("a")
			tt.want(want)
			checkEqual(t, HeadlessService(tt.cluster), want)
		})
	}
}

// wantClientService is the client Service of newCluster(name) without a
// template, written out.
func wantClientService(name string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       "ns",
			Labels:          wantLabels(name, nil),
			OwnerReferences: wantOwner(name),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"etcd.aenix.io/cluster": name},
			Ports: []corev1.ServicePort{
				{Name: "client", Protocol: corev1.ProtocolTCP, Port: 2379, TargetPort: intstr.FromString("client")},
			},
		},
	}
}

func TestClientService(t *testing.T) {
	t.Parallel()
	metricsPort := corev1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 2381, TargetPort: intstr.FromString("metrics")}
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		// want changes wantClientService("a").
		want func(*corev1.Service)
	}{
		{
			name:    "no template",
			cluster: newCluster("a").obj(),
			want:    func(*corev1.Service) {},
		},
		{
			name:    "cluster namespace",
			cluster: newCluster("a").withNamespace("tenants").obj(),
			want:    func(s *corev1.Service) { s.Namespace = "tenants" },
		},
		{
			name:    "empty template",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{}).obj(),
			want:    func(*corev1.Service) {},
		},
		{
			name: "template labels and annotations",
			cluster: newCluster("a").withServiceMetadata(
				map[string]string{"team": "storage"},
				map[string]string{"prometheus.io/scrape": "true"},
			).obj(),
			want: func(s *corev1.Service) {
				s.Labels["team"] = "storage"
				s.Annotations = map[string]string{"prometheus.io/scrape": "true"}
			},
		},
		{
			name: "our labels win over the template's",
			cluster: newCluster("a").withServiceMetadata(
				map[string]string{"app.kubernetes.io/managed-by": "helm", "app.kubernetes.io/instance": "b", "team": "storage"}, nil,
			).obj(),
			want: func(s *corev1.Service) { s.Labels["team"] = "storage" },
		},
		{
			name: "LoadBalancer",
			cluster: newCluster("a").
				withServiceMetadata(nil, map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}).
				withServiceSpec(corev1.ServiceSpec{
					Type:                          corev1.ServiceTypeLoadBalancer,
					LoadBalancerClass:             ptr.To("service.k8s.aws/nlb"),
					LoadBalancerSourceRanges:      []string{"10.0.0.0/8"},
					LoadBalancerIP:                "10.1.2.3",
					AllocateLoadBalancerNodePorts: ptr.To(false),
					ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyLocal,
				}).obj(),
			want: func(s *corev1.Service) {
				s.Annotations = map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptr.To("service.k8s.aws/nlb")
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
				s.Spec.LoadBalancerIP = "10.1.2.3"
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			},
		},
		{
			name: "NodePort with the client nodePort pinned",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Type:  corev1.ServiceTypeNodePort,
				Ports: []corev1.ServicePort{{Name: "client", Port: 2379, NodePort: 32379}},
			}).obj(),
			want: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 32379
			},
		},
		{
			name: "client port moved",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Ports: []corev1.ServicePort{{Name: "client", Port: 12379, AppProtocol: ptr.To("kubernetes.io/h2c")}},
			}).obj(),
			want: func(s *corev1.Service) {
				s.Spec.Ports[0].Port = 12379
				s.Spec.Ports[0].AppProtocol = ptr.To("kubernetes.io/h2c")
			},
		},
		{
			name: "client targetPort set by the template wins",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Ports: []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromString("proxy")}},
			}).obj(),
			want: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("proxy") },
		},
		{
			name: "extra port is added after ours",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Ports: []corev1.ServicePort{metricsPort},
			}).obj(),
			want: func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, metricsPort) },
		},
		{
			name: "extra port listed before client comes after it; client is merged, not duplicated",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Ports: []corev1.ServicePort{metricsPort, {Name: "client", Port: 12379}},
			}).obj(),
			want: func(s *corev1.Service) {
				s.Spec.Ports[0].Port = 12379
				s.Spec.Ports = append(s.Spec.Ports, metricsPort)
			},
		},
		{
			name: "ip families, session affinity and other spec fields",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				IPFamilies:            []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicyPreferDualStack),
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
				TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
			}).obj(),
			want: func(s *corev1.Service) {
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
				s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
				s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
			},
		},
		{
			name: "the selector is always ours",
			cluster: newCluster("a").withServiceSpec(corev1.ServiceSpec{
				Selector: map[string]string{"app": "other"},
			}).obj(),
			want: func(*corev1.Service) {},
		},
		{
			name:    "headless Service template does not touch the client Service",
			cluster: newCluster("a").withHeadlessServiceMetadata(map[string]string{"team": "storage"}, map[string]string{"note": "x"}).obj(),
			want:    func(*corev1.Service) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := wantClientService("a")
			tt.want(want)
			checkEqual(t, ClientService(tt.cluster), want)
		})
	}
}
