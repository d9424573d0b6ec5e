package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deletion policies of an EtcdBackup: what happens to its snapshot when the
// EtcdBackup is deleted.
const (
	// BackupRetain keeps the snapshot in its destination.
	BackupRetain = "Retain"
	// BackupDelete removes the snapshot with the EtcdBackup.
	BackupDelete = "Delete"
)

// Phases of an EtcdBackup.
const (
	// BackupPending: no attempt has started; the condition says what the
	// backup waits for (the cluster, a Secret, a claim).
	BackupPending = "Pending"
	// BackupRunning: an attempt runs.
	BackupRunning = "Running"
	// BackupRetrying: an attempt failed; the next starts at
	// status.nextAttemptTime.
	BackupRetrying = "Retrying"
	// BackupSucceeded: the snapshot is stored and was read back intact.
	BackupSucceeded = "Succeeded"
	// BackupFailed: every attempt failed (spec.backoffLimit was reached),
	// or the attempt ran past spec.timeout for the last time.
	BackupFailed = "Failed"
)

// ConditionBackupSucceeded is the condition of an EtcdBackup: True once the
// snapshot is stored and verified, False when the backup gave up, Unknown
// before that (its reason is the last failure or what it waits for).
const ConditionBackupSucceeded = "Succeeded"

// FinalizerBackup holds an EtcdBackup with deletionPolicy Delete until its
// snapshot is removed from the destination.
const FinalizerBackup = "etcd.aenix.io/backup"

// EtcdBackupSpec is one snapshot of an EtcdCluster, taken once.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec of an EtcdBackup cannot change: a backup is taken once; create a new EtcdBackup"
type EtcdBackupSpec struct {
	// clusterName is the EtcdCluster to back up, in this namespace. The
	// backup is not owned by the cluster: it outlives it.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:etcd.aenix.io:v1alpha1:EtcdCluster"}
	ClusterName string `json:"clusterName"`

	// destination is where the snapshot is stored: an S3-compatible bucket
	// or a PersistentVolumeClaim.
	//
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Destination"
	Destination BackupDestination `json:"destination"`

	// deletionPolicy says what happens to the snapshot when this EtcdBackup
	// is deleted: Retain (the default) keeps it, Delete removes it.
	//
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Deletion Policy"
	DeletionPolicy string `json:"deletionPolicy,omitempty"`

	// timeout bounds one attempt, from its start to the snapshot read back
	// from the destination. Defaults to 30m; at least 1m.
	//
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.timeout must be at least 1m: an attempt starts a Pod, streams the snapshot and reads it back"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Timeout"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// backoffLimit is how many failed attempts are retried (after 10s,
	// 20s, 40s... at most 5m) before the backup is Failed. Defaults to 4.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backoff Limit"
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
}

// BackupDestination is where a snapshot is stored: set exactly one of s3
// and volume.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.volume)",message="spec.destination: set exactly one of s3 and volume"
type BackupDestination struct {
	// s3 is a bucket of an S3-compatible object store.
	//
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`

	// volume is a directory on a PersistentVolumeClaim.
	//
	// +optional
	Volume *VolumeDestination `json:"volume,omitempty"`
}

// Addressing styles of an S3 endpoint.
const (
	// S3AddressingAuto uses virtual-host style for Amazon S3 and path
	// style for other endpoints.
	S3AddressingAuto = "Auto"
	// S3AddressingPath puts the bucket in the path: https://host/bucket/key.
	S3AddressingPath = "Path"
	// S3AddressingVirtualHost puts the bucket in the host name:
	// https://bucket.host/key.
	S3AddressingVirtualHost = "VirtualHost"
)

// S3Destination is a bucket of an S3-compatible object store. Snapshots are
// stored under <prefix>/<namespace>/<cluster>/<backup>.db, with their
// SHA-256, size and revision in the object's metadata.
type S3Destination struct {
	// endpoint is the store's URL, scheme and host only, such as
	// https://s3.eu-central-1.amazonaws.com or https://minio.storage.svc:9000.
	//
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('https://') || self.startsWith('http://')) && url(self).getEscapedPath() in ['', '/'] && url(self).getQuery().size() == 0",message="spec.destination.s3.endpoint must be an http or https URL with a host and no path, such as https://s3.eu-central-1.amazonaws.com or https://minio.storage.svc:9000"
	Endpoint string `json:"endpoint"`

	// bucket is the bucket the snapshot goes to. It must exist: the
	// operator never creates buckets.
	//
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// prefix is put before the object keys, such as backups/etcd; no
	// leading or trailing "/".
	//
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/')",message="spec.destination.s3.prefix must not start or end with /: write backups/etcd, not /backups/etcd/"
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// region is the bucket's region; defaults to us-east-1.
	//
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// addressing is how the bucket is named in requests: Auto (the
	// default: virtual-host style for Amazon S3, path style otherwise),
	// Path or VirtualHost.
	//
	// +kubebuilder:validation:Enum=Auto;Path;VirtualHost
	// +kubebuilder:default=Auto
	// +optional
	Addressing string `json:"addressing,omitempty"`

	// credentialsSecret is a Secret in this namespace with the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN
	// for temporary credentials). Only the Pods that take or remove the
	// snapshot read it.
	CredentialsSecret LocalObjectReference `json:"credentialsSecret"`

	// caSecret is a Secret in this namespace whose key (default ca.crt)
	// holds the PEM CA certificates that sign a private endpoint's
	// certificate; they are trusted besides the system's.
	//
	// +optional
	CASecret *SecretKeySelector `json:"caSecret,omitempty"`
}

// VolumeDestination is a directory on a PersistentVolumeClaim. Snapshots
// are stored as <path>/<namespace>/<cluster>/<backup>.db, with a .json file
// beside each that says what it holds.
type VolumeDestination struct {
	// claimName is a PersistentVolumeClaim in this namespace. A
	// ReadWriteOnce claim ties the Pod that takes the snapshot to the
	// claim's node.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// path is a directory inside the claim, relative to its root, such as
	// etcd; no "..".
	//
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="spec.destination.volume.path must be relative to the claim's root and must not hold ..: write backups/etcd"
	// +optional
	Path string `json:"path,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeySelector names one key of a Secret in the same namespace.
type SecretKeySelector struct {
	// name of the Secret.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret; defaults to ca.crt.
	//
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// EtcdBackupStatus is how far a backup got, and once it succeeded, what it
// holds and where.
type EtcdBackupStatus struct {
	// phase is Pending, Running, Retrying, Succeeded or Failed.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase"
	Phase string `json:"phase,omitempty"`

	// conditions: Succeeded.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// attempts is how many attempts have started.
	//
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// nextAttemptTime is when the next attempt starts, while Retrying.
	//
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`

	// startTime is when the first attempt started; completionTime when the
	// backup succeeded or failed for good.
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// location is where the snapshot is: s3://<bucket>/<key> or
	// pvc://<claim>/<path>.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Location"
	Location string `json:"location,omitempty"`

	// key is the object key (S3) or the path in the claim (volume).
	//
	// +optional
	Key string `json:"key,omitempty"`

	// size is the snapshot's size in bytes, etcd's trailing hash included.
	//
	// +optional
	Size int64 `json:"size,omitempty"`

	// sha256 is the hex SHA-256 of the snapshot as stored.
	//
	// +optional
	SHA256 string `json:"sha256,omitempty"`

	// revision is the highest revision in the snapshot: a restored
	// cluster starts from it.
	//
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// member is the member the snapshot was taken from; clusterID the
	// etcd cluster's ID; etcdVersion that member's version.
	//
	// +optional
	Member string `json:"member,omitempty"`
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
}

// EtcdBackup is one snapshot of an EtcdCluster, taken by a short-lived Pod
// from a healthy member, checked against etcd's own hash, stored in an
// S3-compatible bucket or on a claim, and read back before it counts.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.status.location`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters: the Pods that take the snapshot are named <name>-attempt-<n>, at most 63 characters"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Backup",resources={{Pod,v1},{Secret,v1},{PersistentVolumeClaim,v1}}
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupSpec   `json:"spec"`
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackups.
//
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

// Defaults of an EtcdBackup's spec.
const (
	DefaultBackupTimeout      = 30 * 60 // seconds
	DefaultBackupBackoffLimit = 4
)

// TimeoutSeconds is spec.timeout in seconds, or the default.
func (b *EtcdBackup) TimeoutSeconds() int64 {
	if b.Spec.Timeout == nil || b.Spec.Timeout.Duration <= 0 {
		return DefaultBackupTimeout
	}
	return int64(b.Spec.Timeout.Seconds())
}

// BackoffLimitOrDefault is spec.backoffLimit, or the default.
func (b *EtcdBackup) BackoffLimitOrDefault() int32 {
	if b.Spec.BackoffLimit == nil {
		return DefaultBackupBackoffLimit
	}
	return *b.Spec.BackoffLimit
}

// SnapshotKey is where the backup's snapshot is stored, relative to the
// destination: <prefix>/<namespace>/<cluster>/<backup>.db for S3 (the
// object key), <path>/<namespace>/<cluster>/<backup>.db on a volume.
func (b *EtcdBackup) SnapshotKey() string {
	base := ""
	switch d := b.Spec.Destination; {
	case d.S3 != nil:
		base = d.S3.Prefix
	case d.Volume != nil:
		base = d.Volume.Path
	}
	key := b.Namespace + "/" + b.Spec.ClusterName + "/" + b.Name + ".db"
	if base != "" {
		key = base + "/" + key
	}
	return key
}
