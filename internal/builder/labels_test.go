package builder

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func TestClusterIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		cluster      *etcdv1alpha1.EtcdCluster
		wantLabels   map[string]string
		wantSelector map[string]string
		wantHeadless string
		wantClient   string
	}{
		{
			name:    "short name",
			cluster: newCluster("a").obj(),
			wantLabels: map[string]string{
				"app.kubernetes.io/name":       "etcd",
				"app.kubernetes.io/instance":   "a",
				"app.kubernetes.io/managed-by": "etcd-operator",
				"etcd.aenix.io/cluster":        "a",
			},
			wantSelector: map[string]string{"etcd.aenix.io/cluster": "a"},
			wantHeadless: "a-headless",
			wantClient:   "a",
		},
		{
			name:    "name with dashes in another namespace",
			cluster: newCluster("tenant-etcd").withNamespace("kamaji").withReplicas(5).obj(),
			wantLabels: map[string]string{
				"app.kubernetes.io/name":       "etcd",
				"app.kubernetes.io/instance":   "tenant-etcd",
				"app.kubernetes.io/managed-by": "etcd-operator",
				"etcd.aenix.io/cluster":        "tenant-etcd",
			},
			wantSelector: map[string]string{"etcd.aenix.io/cluster": "tenant-etcd"},
			wantHeadless: "tenant-etcd-headless",
			wantClient:   "tenant-etcd",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkEqual(t, ClusterLabels(tt.cluster), tt.wantLabels)
			checkEqual(t, MemberSelectorLabels(tt.cluster), tt.wantSelector)
			if got := HeadlessServiceName(tt.cluster); got != tt.wantHeadless {
				t.Errorf("HeadlessServiceName() = %q, want %q", got, tt.wantHeadless)
			}
			if got := ClientServiceName(tt.cluster); got != tt.wantClient {
				t.Errorf("ClientServiceName() = %q, want %q", got, tt.wantClient)
			}
			// Every object labelled as the cluster's is picked by the member
			// selector, and the selector is the one the scale subresource
			// publishes (controllers.MemberSelector).
			sel := labels.SelectorFromSet(MemberSelectorLabels(tt.cluster))
			if !sel.Matches(labels.Set(ClusterLabels(tt.cluster))) {
				t.Errorf("MemberSelectorLabels() %v does not select ClusterLabels() %v", sel, ClusterLabels(tt.cluster))
			}
			if got, want := sel.String(), etcdv1alpha1.LabelCluster+"="+tt.cluster.Name; got != want {
				t.Errorf("member selector = %q, want %q", got, want)
			}
		})
	}
}

func TestOwnerReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		want    metav1.OwnerReference
	}{
		{
			name:    "controller reference that blocks deletion",
			cluster: newCluster("a").obj(),
			want: metav1.OwnerReference{
				APIVersion:         "etcd.aenix.io/v1alpha1",
				Kind:               "EtcdCluster",
				Name:               "a",
				UID:                types.UID("a-uid"),
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkEqual(t, OwnerReference(tt.cluster), tt.want)
		})
	}
}

func TestObjectMeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template etcdv1alpha1.EmbeddedObjectMetadata
		want     metav1.ObjectMeta
	}{
		{
			name: "no template",
			want: metav1.ObjectMeta{Name: "obj", Namespace: "ns", Labels: wantLabels("a", nil), OwnerReferences: wantOwner("a")},
		},
		{
			name:     "empty maps give no annotations",
			template: etcdv1alpha1.EmbeddedObjectMetadata{Labels: map[string]string{}, Annotations: map[string]string{}},
			want:     metav1.ObjectMeta{Name: "obj", Namespace: "ns", Labels: wantLabels("a", nil), OwnerReferences: wantOwner("a")},
		},
		{
			name: "template labels and annotations are added",
			template: etcdv1alpha1.EmbeddedObjectMetadata{
				Labels:      map[string]string{"team": "storage"},
				Annotations: map[string]string{"note": "x"},
			},
			want: metav1.ObjectMeta{
				Name: "obj", Namespace: "ns",
				Labels:          wantLabels("a", map[string]string{"team": "storage"}),
				Annotations:     map[string]string{"note": "x"},
				OwnerReferences: wantOwner("a"),
			},
		},
		{
			name: "our labels win over the template's",
			template: etcdv1alpha1.EmbeddedObjectMetadata{Labels: map[string]string{
				"app.kubernetes.io/name":       "not-etcd",
				"app.kubernetes.io/instance":   "b",
				"app.kubernetes.io/managed-by": "helm",
				"etcd.aenix.io/cluster":        "b",
				"team":                         "storage",
			}},
			want: metav1.ObjectMeta{
				Name: "obj", Namespace: "ns",
				Labels:          wantLabels("a", map[string]string{"team": "storage"}),
				OwnerReferences: wantOwner("a"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkEqual(t, ObjectMeta(newCluster("a").obj(), "obj", tt.template), tt.want)
		})
	}
}
