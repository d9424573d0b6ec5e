package builder

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// clusterWrapper builds EtcdCluster fixtures:
// newCluster("a").withReplicas(3).obj().
type clusterWrapper struct {
	etcdv1alpha1.EtcdCluster
}

// newCluster is a cluster called name in namespace "ns" with every optional
// field left unset, as a client could send it before defaulting.
func newCluster(name string) *clusterWrapper {
	return &clusterWrapper{etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
	}}
}

// obj returns a copy of the cluster built so far.
func (w *clusterWrapper) obj() *etcdv1alpha1.EtcdCluster {
	return w.DeepCopy()
}

func (w *clusterWrapper) withNamespace(ns string) *clusterWrapper {
	w.Namespace = ns
	return w
}

func (w *clusterWrapper) withReplicas(n int32) *clusterWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// withServiceMetadata sets the metadata of spec.serviceTemplate.
func (w *clusterWrapper) withServiceMetadata(labels, annotations map[string]string) *clusterWrapper {
	if w.Spec.ServiceTemplate == nil {
		w.Spec.ServiceTemplate = &etcdv1alpha1.ServiceTemplate{}
	}
	w.Spec.ServiceTemplate.Labels = labels
	w.Spec.ServiceTemplate.Annotations = annotations
	return w
}

// withServiceSpec sets the spec of spec.serviceTemplate.
func (w *clusterWrapper) withServiceSpec(spec corev1.ServiceSpec) *clusterWrapper {
	if w.Spec.ServiceTemplate == nil {
		w.Spec.ServiceTemplate = &etcdv1alpha1.ServiceTemplate{}
	}
	w.Spec.ServiceTemplate.Spec = spec
	return w
}

// withHeadlessServiceMetadata sets the metadata of
// spec.headlessServiceTemplate.
func (w *clusterWrapper) withHeadlessServiceMetadata(labels, annotations map[string]string) *clusterWrapper {
	w.Spec.HeadlessServiceTemplate = &etcdv1alpha1.HeadlessServiceTemplate{
		EmbeddedObjectMetadata: etcdv1alpha1.EmbeddedObjectMetadata{Labels: labels, Annotations: annotations},
	}
	return w
}

// withPDB sets the spec of spec.podDisruptionBudgetTemplate; withPDB(
// etcdv1alpha1.PodDisruptionBudgetSpec{}) is the empty template {}.
func (w *clusterWrapper) withPDB(spec etcdv1alpha1.PodDisruptionBudgetSpec) *clusterWrapper {
	if w.Spec.PodDisruptionBudgetTemplate == nil {
		w.Spec.PodDisruptionBudgetTemplate = &etcdv1alpha1.PodDisruptionBudgetTemplate{}
	}
	w.Spec.PodDisruptionBudgetTemplate.Spec = spec
	return w
}

// withPDBMetadata sets the metadata of spec.podDisruptionBudgetTemplate.
func (w *clusterWrapper) withPDBMetadata(labels, annotations map[string]string) *clusterWrapper {
	if w.Spec.PodDisruptionBudgetTemplate == nil {
		w.Spec.PodDisruptionBudgetTemplate = &etcdv1alpha1.PodDisruptionBudgetTemplate{}
	}
	w.Spec.PodDisruptionBudgetTemplate.Labels = labels
	w.Spec.PodDisruptionBudgetTemplate.Annotations = annotations
	return w
}

// wantOwner is the owner reference of newCluster(name), written out rather
// than computed by OwnerReference.
func wantOwner(name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion:         "etcd.aenix.io/v1alpha1",
		Kind:               "EtcdCluster",
		Name:               name,
		UID:                types.UID(name + "-uid"),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
}

// wantLabels are the ClusterLabels of cluster name, written out, plus extra.
func wantLabels(name string, extra map[string]string) map[string]string {
	l := map[string]string{
		"app.kubernetes.io/name":       "etcd",
		"app.kubernetes.io/instance":   name,
		"app.kubernetes.io/managed-by": "etcd-operator",
		"etcd.aenix.io/cluster":        name,
	}
	for k, v := range extra {
		if _, ours := l[k]; !ours {
			l[k] = v
		}
	}
	return l
}

// checkEqual fails t when got is not deeply equal to want, nil and empty
// maps and slices told apart.
func checkEqual[T any](t *testing.T, got, want T) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	d := diff.Diff(want, got)
	if d == "" {
		d = "(they differ only in nil against empty maps or slices)"
	}
	t.Errorf("got differs from want (-want +got):\n%s", d)
}
