// Package builder computes the objects an EtcdCluster's members need: the
// member Pods, their claims, URLs and spec hash (pod.go), the Services
// (service.go), the PodDisruptionBudget (pdb.go), the members' TLS
// volumes and flags, the Secrets they read and the trust bundle hash
// (tls.go), and the names, labels, ports and object metadata they share
// (labels.go). Every function here is a pure
// function of the cluster: no client, no I/O, and the objects it returns
// share no memory with the cluster, so a caller may change them freely.
// Reconcilers apply what these functions return; the cert-manager objects
// are built in internal/pki.
package builder

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Ports of an etcd member and the names they carry on containers and
// Services.
const (
	// ClientPort is where members serve clients.
	ClientPort = 2379
	// PeerPort is where members talk to each other.
	PeerPort = 2380
	// MetricsPort is where members serve /metrics and /health.
	MetricsPort = 2381

	// ClientPortName names the client port.
	ClientPortName = "client"
	// PeerPortName names the peer port.
	PeerPortName = "peer"
	// MetricsPortName names the metrics port.
	MetricsPortName = "metrics"
)

// Recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"

	appName      = "etcd"
	operatorName = "etcd-operator"
)

// ClusterLabels are the labels on every object of a cluster:
// app.kubernetes.io/name=etcd, app.kubernetes.io/instance=<cluster>,
// app.kubernetes.io/managed-by=etcd-operator and
// etcd.aenix.io/cluster=<cluster>. Labels from a template are added to them
// but never replace them.
func ClusterLabels(c *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{
		labelName:                 appName,
		labelInstance:             c.Name,
		labelManagedBy:            operatorName,
		etcdv1alpha1.LabelCluster: c.Name,
	}
}

// MemberSelectorLabels select the member Pods of a cluster:
// etcd.aenix.io/cluster=<cluster>. It is the selector of the Services and the
// PodDisruptionBudget and must stay equal to controllers.MemberSelector,
// which the scale subresource publishes.
func MemberSelectorLabels(c *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{etcdv1alpha1.LabelCluster: c.Name}
}

// HeadlessServiceName is the name of the headless Service that gives every
// member its DNS name (<member>.<cluster>-headless.<namespace>.svc).
func HeadlessServiceName(c *etcdv1alpha1.EtcdCluster) string {
	return c.Name + "-headless"
}

// ClientServiceName is the name of the Service clients connect to: the
// cluster's own name.
func ClientServiceName(c *etcdv1alpha1.EtcdCluster) string {
	return c.Name
}

// OwnerReference is the controller reference every object of the cluster
// carries, so that it is garbage-collected with the cluster and its changes
// wake the cluster's reconciler. Builders set it themselves: the objects they
// return are complete, and a server-side apply of them owns the reference
// too.
func OwnerReference(c *etcdv1alpha1.EtcdCluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         etcdv1alpha1.GroupVersion.String(),
		Kind:               "EtcdCluster",
		Name:               c.Name,
		UID:                c.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// ObjectMeta is the metadata of the object called name of cluster c: in the
// cluster's namespace, owned by it, with the template's labels and
// annotations. Our labels win over the template's.
func ObjectMeta(c *etcdv1alpha1.EtcdCluster, name string, template etcdv1alpha1.EmbeddedObjectMetadata) metav1.ObjectMeta {
	labels := maps.Clone(template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, ClusterLabels(c))
	var annotations map[string]string
	if len(template.Annotations) > 0 {
		annotations = maps.Clone(template.Annotations)
	}
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       c.Namespace,
		Labels:          labels,
		Annotations:     annotations,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
	}
}
