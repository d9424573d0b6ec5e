// Package v1alpha1 contains the v1alpha1 API of the etcd.aenix.io group: the
// EtcdCluster resource that describes an etcd cluster run by the operator,
// the EtcdTenant resource that shares one with a consumer, and the
// EtcdBackup and EtcdBackupSchedule resources that take snapshots of one.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.aenix.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.aenix.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EtcdCluster{}, &EtcdClusterList{}, &EtcdTenant{}, &EtcdTenantList{}, &EtcdBackup{}, &EtcdBackupList{}, &EtcdBackupSchedule{}, &EtcdBackupScheduleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
