package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Retention policies of an EtcdTenant's keys once the tenant is deleted.
const (
	// RetentionKeep leaves the keys under the prefix in etcd.
	RetentionKeep = "Keep"
	// RetentionDelete deletes every key under the prefix.
	RetentionDelete = "Delete"
)

// Conditions and finalizer of an EtcdTenant.
const (
	// FinalizerTenant holds a tenant until its etcd user and role are
	// revoked and its keys kept or deleted.
	FinalizerTenant = "etcd.aenix.io/tenant"
)

// EtcdTenantSpec is one consumer's share of an etcd cluster: a key prefix
// only it may read and write, and credentials for it.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName cannot change: create a new EtcdTenant for another cluster"
// +kubebuilder:validation:XValidation:rule="(has(self.password) && self.password) == (has(oldSelf.password) && oldSelf.password)",message="spec.password cannot change: etcd cannot take a password back from a user; create a new EtcdTenant (with retentionPolicy Keep the keys stay)"
// +kubebuilder:validation:XValidation:rule="has(self.prefix) == has(oldSelf.prefix) && (!has(self.prefix) || self.prefix == oldSelf.prefix)",message="spec.prefix cannot change: the tenant's keys live under it"
type EtcdTenantSpec struct {
	// clusterName is the EtcdCluster, in the tenant's namespace, that
	// serves the tenant. The cluster needs spec.security.enableAuth: etcd
	// only keeps tenants apart when it checks who is calling.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:etcd.aenix.io:v1alpha1:EtcdCluster"}
	ClusterName string `json:"clusterName"`

	// prefix is the key prefix the tenant may read and write, and nothing
	// else. It starts and ends with "/" so that no prefix is the start of
	// another tenant's by accident. Defaults to "/<tenant name>/". Cannot
	// change: the tenant's data lives under it.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && self.endsWith('/') && size(self) > 1",message="spec.prefix must start and end with \"/\" and name something, such as /tenant-a/"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Key Prefix"
	Prefix string `json:"prefix,omitempty"`

	// password gives the tenant a generated password as well as a client
	// certificate. A cluster without client TLS always gets password
	// credentials; one with operator-managed TLS gets a client certificate
	// whose CN is the tenant's etcd user.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Password",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Password bool `json:"password,omitempty"`

	// retentionPolicy says what happens to the keys under the prefix when
	// the tenant is deleted: Keep (the default) leaves them, Delete deletes
	// them. The user and role are revoked either way.
	//
	// +kubebuilder:validation:Enum=Keep;Delete
	// +kubebuilder:default=Keep
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Retention Policy"
	RetentionPolicy string `json:"retentionPolicy,omitempty"`
}

// EtcdTenantStatus is what the operator has set up for a tenant.
type EtcdTenantStatus struct {
	// observedGeneration is the generation of the spec the status reflects.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready says whether the connection Secret works, and if
	// not what is missing.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// prefix is the effective key prefix.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Key Prefix"
	Prefix string `json:"prefix,omitempty"`

	// user is the tenant's etcd user (and role).
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="etcd User"
	User string `json:"user,omitempty"`

	// secretName is the Secret holding what a consumer needs: endpoints,
	// prefix, and ca.crt, tls.crt, tls.key and username, password where
	// used.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Connection Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	SecretName string `json:"secretName,omitempty"`
}

// EtcdTenant is a consumer of an EtcdCluster (a kube-apiserver, k0s, a
// hosted control plane) with its own key prefix, etcd user and role, and a
// connection Secret. Its name is at most 57 characters: the etcd user
// tenant-<name> is its client certificate's common name (64 at most).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdtenant
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.prefix`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 57",message="metadata.name must be at most 57 characters: the tenant's etcd user is tenant-<name>, the common name of its client certificate, which holds at most 64 characters"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Tenant",resources={{Secret,v1},{Certificate,v1}}
type EtcdTenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdTenantSpec   `json:"spec"`
	Status EtcdTenantStatus `json:"status,omitempty"`
}

// EtcdTenantList is a list of EtcdTenants.
//
// +kubebuilder:object:root=true
type EtcdTenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdTenant `json:"items"`
}

// EffectivePrefix is the tenant's key prefix: spec.prefix, or
// "/<name>/".
func (t *EtcdTenant) EffectivePrefix() string {
	if t.Spec.Prefix != "" {
		return t.Spec.Prefix
	}
	return "/" + t.Name + "/"
}

// UserName is the tenant's etcd user and role: "tenant-<name>", so it can
// never be root or collide with users an administrator adds by hand.
func (t *EtcdTenant) UserName() string { return "tenant-" + t.Name }

// ConnectionSecretName is the name of the tenant's connection Secret.
func (t *EtcdTenant) ConnectionSecretName() string { return t.Name + "-etcd" }

// ClientCertificateName names the tenant's cert-manager Certificate and
// the Secret it fills.
func (t *EtcdTenant) ClientCertificateName() string { return t.Name + "-etcd-client" }

// PrefixesOverlap tells whether one prefix is the start of the other, so
// that one tenant could read the other's keys.
func PrefixesOverlap(a, b string) bool {
	return len(a) <= len(b) && b[:len(a)] == a || len(b) < len(a) && a[:len(b)] == b
}
