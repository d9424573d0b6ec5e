// Package v1alpha1 contains the v1alpha1 API of the etcd.aenix.io group: the
// EtcdCluster resource that describes an etcd cluster run by the operator.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.aenix.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.aenix.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
