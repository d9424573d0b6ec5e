package conditions

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func TestConfigurationWarning(t *testing.T) {
	t.Parallel()
	pvc := &etcdv1alpha1.EmbeddedPersistentVolumeClaim{}
	tests := []struct {
		name       string
		storage    etcdv1alpha1.StorageSpec
		refused    string // why the claims cannot grow
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"no storage", etcdv1alpha1.StorageSpec{}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"emptyDir only", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"volumeClaimTemplate only", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: pvc}, "", metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings},
		{"both", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}, VolumeClaimTemplate: pvc}, "", metav1.ConditionTrue, etcdv1alpha1.ReasonEmptyDirIgnored},
		{"claims that cannot grow", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: pvc}, "Claim x cannot grow", metav1.ConditionTrue, etcdv1alpha1.ReasonClaimsNotExpandable},
		{"both and claims that cannot grow: the spec's warning first", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}, VolumeClaimTemplate: pvc}, "Claim x cannot grow", metav1.ConditionTrue, etcdv1alpha1.ReasonEmptyDirIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Generation: 7}, Spec: etcdv1alpha1.EtcdClusterSpec{Storage: tt.storage}}
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
