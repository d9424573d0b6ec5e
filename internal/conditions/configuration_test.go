package conditions

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func TestConfigurationWarning(t *testing.T) {
	t.Parallel()
	pvc := &etcdv1alpha1.EmbeddedPersistentVolumeClaim{}
	claim := func(size string) *etcdv1alpha1.EmbeddedPersistentVolumeClaim {
		return &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}
	}
	tests := []struct {
		name       string
		storage    etcdv1alpha1.StorageSpec
		options    map[string]string
		refused    string // why the claims cannot grow
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"no storage", etcdv1alpha1.StorageSpec{}, nil, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"emptyDir only", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}, nil, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"volumeClaimTemplate only", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: pvc}, nil, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"both", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}, VolumeClaimTemplate: pvc}, nil, "", metav1.ConditionTrue, etcdv1alpha1.ReasonEmptyDirIgnored},
		{"claims that cannot grow", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: pvc}, nil, "Claim x cannot grow", metav1.ConditionTrue, etcdv1alpha1.ReasonClaimsNotExpandable},
		{"both and claims that cannot grow: the spec's warning first", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}, VolumeClaimTemplate: pvc}, nil, "Claim x cannot grow", metav1.ConditionTrue, etcdv1alpha1.ReasonEmptyDirIgnored},
		// 6 x 64 MB of log files, 8Mi of room and twice the quota.
		{"a claim for etcd's default quota", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim("4471Mi")}, map[string]string{"quota-backend-bytes": "2147483648"}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"a claim too small for etcd's default quota", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim("4Gi")}, map[string]string{"quota-backend-bytes": "2147483648"}, "", metav1.ConditionTrue, etcdv1alpha1.ReasonVolumeTooSmall},
		{"an emptyDir too small for the log files kept", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("512Mi"))}}, map[string]string{"max-wals": "10"}, "", metav1.ConditionTrue, etcdv1alpha1.ReasonVolumeTooSmall},
		{"the operator's quota fits", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim("512Mi")}, map[string]string{"max-wals": "5"}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"an unbounded emptyDir holds any quota", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}, map[string]string{"quota-backend-bytes": "8589934592"}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Generation: 7}, Spec: etcdv1alpha1.EtcdClusterSpec{Storage: tt.storage, Options: tt.options}}
			got := ConfigurationWarning(cluster, tt.refused)
			if got.Type != etcdv1alpha1.ConditionConfigurationWarning || got.Status != tt.wantStatus || got.Reason != tt.wantReason {
				t.Errorf("ConfigurationWarning() = %s/%s/%s, want %s/%s/%s", got.Type, got.Status, got.Reason, etcdv1alpha1.ConditionConfigurationWarning, tt.wantStatus, tt.wantReason)
			}
			if got.ObservedGeneration != 7 {
				t.Errorf("ObservedGeneration = %d, want 7", got.ObservedGeneration)
			}
			if got.Message == "" {
				t.Error("Message is empty; users read it")
			}
		})
	}
}
