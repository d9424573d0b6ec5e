package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

var serviceTypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}

// HeadlessService is the headless Service that gives every member a stable
// DNS name (the member Pods set it as their subdomain). It selects the
// cluster's members, Ready or not: members must find each other before they
// are Ready. It exposes the peer and client ports. Its labels are
// ClusterLabels plus those of spec.headlessServiceTemplate (ours win) and its
// annotations those of the template.
func HeadlessService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	var template etcdv1alpha1.EmbeddedObjectMetadata
	if c.Spec.HeadlessServiceTemplate != nil {
		template = c.Spec.HeadlessServiceTemplate.EmbeddedObjectMetadata
	}
	return &corev1.Service{
		TypeMeta:   serviceTypeMeta,
		ObjectMeta: ObjectMeta(c, HeadlessServiceName(c), template),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 MemberSelectorLabels(c),
			Ports: []corev1.ServicePort{
				servicePort(PeerPortName, PeerPort),
				servicePort(ClientPortName, ClientPort),
				servicePort(MetricsPortName, MetricsPort),
			},
		},
	}
}

// ClientService is the Service clients reach the cluster through, named
// after the cluster. By default it is a ClusterIP Service with one port,
// client (2379, to the members' client port), that sends traffic only to
// Ready members.
//
// spec.serviceTemplate is merged over these defaults:
//   - every field of the template's spec that is set wins over the default
//     (type, clusterIP, loadBalancer fields, externalTrafficPolicy,
//     ipFamilies, sessionAffinity, publishNotReadyAddresses, ...), except
//     the selector, which is always the cluster's members;
//   - ports are merged by name: a template port named client is merged
//     into ours, its set fields winning (port, nodePort, targetPort,
//     protocol, appProtocol), so that a template can move the client port or
//     pin its nodePort; other template ports are added after it, in order;
//   - labels of the template's metadata are added to ClusterLabels (ours win)
//     and its annotations are copied.
func ClientService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	var template etcdv1alpha1.EmbeddedObjectMetadata
	var spec corev1.ServiceSpec
	if t := c.Spec.ServiceTemplate; t != nil {
		template = t.EmbeddedObjectMetadata
		t.Spec.DeepCopyInto(&spec)
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	spec.Selector = MemberSelectorLabels(c)
	spec.Ports = mergePorts([]corev1.ServicePort{servicePort(ClientPortName, ClientPort)}, spec.Ports)
	return &corev1.Service{
		TypeMeta:   serviceTypeMeta,
		ObjectMeta: ObjectMeta(c, ClientServiceName(c), template),
		Spec:       spec,
	}
}

// servicePort is a TCP port called name that sends to the members' port of
// the same name.
func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{
		Name:       name,
		Protocol:   corev1.ProtocolTCP,
		Port:       port,
		TargetPort: intstr.FromString(name),
	}
}

// mergePorts merges the template's ports into ours by name: the set fields
// of a template port win over those of our port of the same name; template
// ports with other names follow ours, in the template's order.
func mergePorts(ours, template []corev1.ServicePort) []corev1.ServicePort {
	merged := make([]corev1.ServicePort, 0, len(ours)+len(template))
	byName := make(map[string]int, len(ours))
	for _, p := range ours {
		byName[p.Name] = len(merged)
		merged = append(merged, p)
	}
	for _, t := range template {
		i, ok := byName[t.Name]
		if !ok {
			merged = append(merged, t)
			continue
		}
		p := &merged[i]
		if t.Protocol != "" {
			p.Protocol = t.Protocol
		}
		if t.AppProtocol != nil {
			p.AppProtocol = t.AppProtocol
		}
		if t.Port != 0 {
			p.Port = t.Port
		}
		if t.TargetPort != (intstr.IntOrString{}) {
			p.TargetPort = t.TargetPort
		}
		if t.NodePort != 0 {
			p.NodePort = t.NodePort
		}
	}
	return merged
}
