package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
//
// +kubebuilder:validation:XValidation:rule="(has(self.security) && has(self.security.tls)) == (has(oldSelf.security) && has(oldSelf.security.tls))",message="spec.security.tls cannot be added to or removed from an existing cluster: the operator does not roll TLS changes member by member yet, and a half-applied change would cut members off from each other; create a new EtcdCluster with the TLS settings you want and move the data to it"
// +kubebuilder:validation:XValidation:rule="(has(self.storage) && has(self.storage.volumeClaimTemplate)) == (has(oldSelf.storage) && has(oldSelf.storage.volumeClaimTemplate))",message="spec.storage: the storage kind (emptyDir or volumeClaimTemplate) cannot change on an existing cluster; create a new EtcdCluster with the storage you want and move the data to it"
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudgetTemplate) || !has(self.podDisruptionBudgetTemplate.spec) || !has(self.podDisruptionBudgetTemplate.spec.minAvailable) || !has(self.podDisruptionBudgetTemplate.spec.maxUnavailable) || (type(self.podDisruptionBudgetTemplate.spec.minAvailable) == int && type(self.podDisruptionBudgetTemplate.spec.maxUnavailable) == int && self.podDisruptionBudgetTemplate.spec.minAvailable + self.podDisruptionBudgetTemplate.spec.maxUnavailable == self.replicas)",message="spec.podDisruptionBudgetTemplate.spec: minAvailable and maxUnavailable are both set but do not add up to spec.replicas; set only one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudgetTemplate) || !has(self.podDisruptionBudgetTemplate.spec) || !has(self.podDisruptionBudgetTemplate.spec.minAvailable) || type(self.podDisruptionBudgetTemplate.spec.minAvailable) != int || self.podDisruptionBudgetTemplate.spec.minAvailable <= self.replicas",message="spec.podDisruptionBudgetTemplate.spec.minAvailable is more than spec.replicas: set at most spec.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudgetTemplate) || !has(self.podDisruptionBudgetTemplate.spec) || !has(self.podDisruptionBudgetTemplate.spec.maxUnavailable) || type(self.podDisruptionBudgetTemplate.spec.maxUnavailable) != int || self.podDisruptionBudgetTemplate.spec.maxUnavailable <= self.replicas",message="spec.podDisruptionBudgetTemplate.spec.maxUnavailable is more than spec.replicas: set at most spec.replicas"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap) && (!has(self.bootstrap) || self.bootstrap == oldSelf.bootstrap)",message="spec.bootstrap can only be set when the EtcdCluster is created: a restore replaces every key, so it never runs over a cluster that has data. Create a new EtcdCluster with spec.bootstrap.restore and move clients to it, or delete this EtcdCluster and create it again with spec.bootstrap.restore"
type EtcdClusterSpec struct {
	// replicas is the number of etcd members. Use an odd number: 3 members
	// survive the loss of 1, 5 survive the loss of 2. The operator changes
	// membership one member at a time and never below quorum.
	//
	// +kubebuilder:default=3
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="spec.replicas must be at least 1: scaling to zero would stop every member (and lose all data kept in emptyDirs); to stop using a cluster, delete the EtcdCluster (claims are deleted with it)"
	// +kubebuilder:validation:Maximum=9
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas,omitempty"`

	// options are etcd command-line flags, written without the leading dashes
	// (for example election-timeout: "1000"). Flags the operator sets itself
	// (member name, data directory, URLs, initial cluster, TLS files) cannot be
	// given here, nor unsafe-no-fsync, which can lose acknowledged writes.
	// Unless auto-compaction-mode or auto-compaction-retention is given,
	// members compact their history every 5 minutes
	// (auto-compaction-mode periodic, auto-compaction-retention 5m); when
	// either is given, both are the user's.
	//
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))",message="spec.options keys are etcd flag names: write them in lower case without the leading dashes, for example election-timeout"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['unsafe-no-fsync', 'experimental-unsafe-no-fsync'])",message="spec.options sets unsafe-no-fsync: without fsync a member that loses power loses writes it has acknowledged and can come back disagreeing with its peers; remove it"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['name', 'data-dir', 'wal-dir', 'config-file', 'listen-peer-urls', 'listen-client-urls', 'listen-client-http-urls', 'listen-metrics-urls', 'initial-advertise-peer-urls', 'advertise-client-urls', 'initial-cluster', 'initial-cluster-state', 'initial-cluster-token', 'discovery', 'discovery-srv', 'discovery-srv-name', 'discovery-token', 'discovery-endpoints', 'force-new-cluster', 'cert-file', 'key-file', 'trusted-ca-file', 'client-cert-auth', 'auto-tls', 'peer-cert-file', 'peer-key-file', 'peer-trusted-ca-file', 'peer-client-cert-auth', 'peer-auto-tls', 'peer-skip-client-san-verification', 'experimental-peer-skip-client-san-verification', 'peer-cert-allowed-hostname', 'peer-cert-allowed-cn'])",message="spec.options sets a flag the operator owns (name, data-dir, wal-dir, config-file, listen-peer-urls, listen-client-urls, listen-client-http-urls, listen-metrics-urls, initial-advertise-peer-urls, advertise-client-urls, initial-cluster, initial-cluster-state, initial-cluster-token, discovery*, force-new-cluster, cert-file, key-file, trusted-ca-file, client-cert-auth, auto-tls and their peer- forms, peer-skip-client-san-verification, peer-cert-allowed-hostname, peer-cert-allowed-cn): remove it; TLS comes from spec.security and the data directory from spec.storage"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="etcd Options"
	Options map[string]string `json:"options,omitempty"`

	// storage is where each member keeps its data: an emptyDir (lost with the
	// Pod; the operator replaces such a member) or one PersistentVolumeClaim
	// per member from volumeClaimTemplate. When both are given,
	// volumeClaimTemplate wins and the EtcdCluster reports it with the
	// ConfigurationWarning condition. Without storage, members use an emptyDir.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage StorageSpec `json:"storage,omitempty"`

	// podTemplate shapes every member Pod: its metadata and the Pod spec
	// fields listed here. A container named etcd is merged into the
	// operator's etcd container (image, resources, env, probes); any other
	// container runs beside it.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Template"
	PodTemplate PodTemplate `json:"podTemplate,omitempty"`

	// serviceTemplate is merged over the client Service the operator creates
	// for the cluster (named after the EtcdCluster).
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Client Service Template"
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`

	// headlessServiceTemplate sets metadata on the headless Service that gives
	// every member its stable DNS name.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Headless Service Template"
	HeadlessServiceTemplate *HeadlessServiceTemplate `json:"headlessServiceTemplate,omitempty"`

	// podDisruptionBudgetTemplate asks for a PodDisruptionBudget over the
	// members. An empty template ({}) gives a quorum-safe budget
	// (minAvailable = replicas/2 + 1); without it no budget is created.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="PodDisruptionBudget Template"
	PodDisruptionBudgetTemplate *PodDisruptionBudgetTemplate `json:"podDisruptionBudgetTemplate,omitempty"`

	// unhealthyMemberTimeout is how long a voting member may stay unhealthy
	// (its Pod not Ready and the member not answering a linearizable read)
	// before the operator replaces it with a fresh member: its data was
	// wiped, its claim lost, or its node will not return. A member is only
	// replaced while the others keep quorum without it; with a claim, the
	// claim is deleted with the member. A learner is removed once it has
	// made no progress (its raft applied index did not advance) for this
	// long, or 5m when this is shorter; one that advances is kept. Defaults
	// to 5m.
	//
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.unhealthyMemberTimeout must be at least 10s: a member restarting should not be replaced"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Unhealthy Member Timeout"
	UnhealthyMemberTimeout *metav1.Duration `json:"unhealthyMemberTimeout,omitempty"`

	// maintenance configures how the operator keeps the members' databases
	// in shape: compaction and defragmentation when a member raises NOSPACE
	// or its database is fragmented.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Maintenance"
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// security configures TLS for peer and client traffic and etcd
	// authentication.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Security"
	Security *SecuritySpec `json:"security,omitempty"`

	// bootstrap says where a new cluster's data comes from: nowhere (an
	// empty cluster, without bootstrap) or a snapshot. It is read only
	// when the cluster is created, and cannot be added, changed or
	// removed later.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Bootstrap"
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// recovery says what the operator may do on its own when the cluster's
	// quorum is lost for good (more voters gone with their data than it
	// can lose; docs/recovery.md).
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Recovery"
	Recovery *RecoverySpec `json:"recovery,omitempty"`
}

// QuorumLossPolicy is whether the operator rebuilds a cluster whose quorum
// is lost for good without being asked.
// +kubebuilder:validation:Enum=Manual;Automatic
type QuorumLossPolicy string

const (
	// QuorumLossManual rebuilds the cluster from its most advanced survivor
	// only when the annotation etcd.aenix.io/approve-recovery names the ID
	// of the plan in status.recoveryPlan.
	QuorumLossManual QuorumLossPolicy = "Manual"
	// QuorumLossAutomatic rebuilds it from whatever plan the operator
	// computes, without approval.
	QuorumLossAutomatic QuorumLossPolicy = "Automatic"
)

// RecoverySpec says what the operator may do on its own to recover.
type RecoverySpec struct {
	// quorumLoss is Manual (the default: status.recoveryPlan shows how the
	// cluster would be rebuilt from its most advanced survivor and what
	// that could lose, and nothing happens until the annotation
	// etcd.aenix.io/approve-recovery names that plan's ID) or Automatic
	// (the operator rebuilds the cluster as soon as it has a plan, losing
	// what the plan says could be lost).
	//
	// +kubebuilder:default=Manual
	// +optional
	QuorumLoss QuorumLossPolicy `json:"quorumLoss,omitempty"`
}

// BootstrapSpec says where a new cluster's data comes from.
type BootstrapSpec struct {
	// restore starts the cluster from the snapshot of an EtcdBackup: its
	// first member restores it under this cluster's identity (new cluster
	// and member IDs, the snapshot's keys, values and revision), and the
	// other members join it as learners.
	//
	// +optional
	Restore *RestoreSource `json:"restore,omitempty"`
}

// RestoreSource is the snapshot a new cluster starts from.
type RestoreSource struct {
	// backupName is a Succeeded EtcdBackup in this namespace; its status
	// gives the snapshot's location, size, SHA-256 and revision, which the
	// restore checks before anything starts.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BackupName string `json:"backupName"`
}

// MaintenanceSpec configures compaction and defragmentation.
type MaintenanceSpec struct {
	// defragmentation switches compaction, defragmentation and disarming of
	// NOSPACE alarms on or off. Off, the operator only reports alarms and
	// fragmentation. Defaults to true.
	//
	// +optional
	Defragmentation *bool `json:"defragmentation,omitempty"`

	// fragmentationThresholdPercent is the share of a member's database
	// that must be free space before it is defragmented. Defaults to 50.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	FragmentationThresholdPercent *int32 `json:"fragmentationThresholdPercent,omitempty"`

	// minDefragmentationSize is the database size below which a member is
	// not defragmented for fragmentation alone (a NOSPACE alarm always
	// leads to defragmentation). Defaults to 64Mi.
	//
	// +optional
	MinDefragmentationSize *resource.Quantity `json:"minDefragmentationSize,omitempty"`
}

// EmbeddedObjectMetadata is the metadata the operator copies onto an object it
// creates from a template.
type EmbeddedObjectMetadata struct {
	// labels are added to the object's labels.
	//
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the object's annotations.
	//
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// StorageSpec is where members keep their data.
type StorageSpec struct {
	// emptyDir keeps each member's data in an emptyDir volume, lost when the
	// Pod is deleted. Ignored when volumeClaimTemplate is set. A sizeLimit
	// must be at least 512Mi: etcd keeps up to six 64 MB write-ahead log
	// files besides its database (max-wals and the one it preallocates).
	// With a sizeLimit and no quota-backend-bytes in options, the
	// operator sets the quota to what the volume holds (see
	// volumeClaimTemplate).
	//
	// +kubebuilder:validation:XValidation:rule="!has(self.sizeLimit) || quantity(string(self.sizeLimit)).compareTo(quantity('512Mi')) >= 0",messageExpression="'spec.storage.emptyDir.sizeLimit ' + string(self.sizeLimit) + ' is too small for an etcd member, which keeps up to six 64 MB write-ahead log files besides its database: set at least 512Mi, or leave sizeLimit out'"
	// +optional
	EmptyDir *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`

	// volumeClaimTemplate gives each member its own PersistentVolumeClaim,
	// kept across Pod restarts and deleted when the member is removed.
	// spec.resources.requests.storage is required, at least 512Mi (etcd
	// keeps up to six 64 MB write-ahead log files besides its database:
	// max-wals, 5 by default, and the one it preallocates); it can grow
	// but never shrink. Unless options set quota-backend-bytes, the
	// operator sets it to what the volume holds besides those files,
	// halved (a defragmentation or a snapshot from the leader writes a
	// second copy of the database), at most etcd's default 2Gi: a 512Mi
	// volume gets a quota of about 69Mi, 4.4Gi or more gets 2Gi. A full
	// database raises etcd's NOSPACE alarm, which the operator clears; a
	// full volume would crash the member instead.
	//
	// +optional
	VolumeClaimTemplate *EmbeddedPersistentVolumeClaim `json:"volumeClaimTemplate,omitempty"`
}

// EmbeddedPersistentVolumeClaim is the template of each member's
// PersistentVolumeClaim.
//
// +kubebuilder:validation:XValidation:rule="has(self.spec.resources) && has(self.spec.resources.requests) && 'storage' in self.spec.resources.requests",message="spec.storage.volumeClaimTemplate.spec.resources.requests.storage is required: set the size of each member's volume, for example 10Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.resources) || !has(self.spec.resources.requests) || !('storage' in self.spec.resources.requests) || quantity(string(self.spec.resources.requests['storage'])).compareTo(quantity('512Mi')) >= 0",messageExpression="'spec.storage.volumeClaimTemplate.spec.resources.requests.storage ' + string(self.spec.resources.requests['storage']) + ' is too small for an etcd member, which keeps up to six 64 MB write-ahead log files besides its database: request at least 512Mi'"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.resources) || !has(oldSelf.spec.resources.requests) || !('storage' in oldSelf.spec.resources.requests) || !has(self.spec.resources) || !has(self.spec.resources.requests) || !('storage' in self.spec.resources.requests) || quantity(string(self.spec.resources.requests['storage'])).compareTo(quantity(string(oldSelf.spec.resources.requests['storage']))) >= 0",messageExpression="'spec.storage.volumeClaimTemplate.spec.resources.requests.storage cannot shrink from ' + string(oldSelf.spec.resources.requests['storage']) + ' to ' + string(self.spec.resources.requests['storage']) + ': volumes only grow; keep the size or make it larger'"
type EmbeddedPersistentVolumeClaim struct {
	// metadata is added to every member's PersistentVolumeClaim.
	//
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is the PersistentVolumeClaim spec of every member's volume.
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// PodTemplate shapes every member Pod.
//
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || !self.metadata.labels.exists(k, k.startsWith('etcd.aenix.io/'))",message="spec.podTemplate.metadata.labels: keys with the etcd.aenix.io/ prefix are set by the operator to identify members; use another prefix"
type PodTemplate struct {
	// metadata is added to every member Pod.
	//
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec holds the Pod spec fields users may set on member Pods.
	//
	// +optional
	Spec PodSpec `json:"spec,omitempty"`
}

// PodSpec holds the fields of a Pod spec that users may set on member Pods.
// Each field has the meaning it has in a Pod.
type PodSpec struct {
	// imagePullSecrets are the Secrets used to pull the member images.
	//
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// serviceAccountName is the ServiceAccount member Pods run as.
	//
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// affinity constrains which nodes members run on and how they spread.
	//
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// nodeSelector restricts members to nodes with these labels.
	//
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let members run on tainted nodes.
	//
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// securityContext is the Pod-level security context.
	//
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// priorityClassName is the PriorityClass of member Pods.
	//
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// topologySpreadConstraints spread members across topology domains.
	//
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// terminationGracePeriodSeconds is how long a member gets to stop cleanly.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// schedulerName is the scheduler that places member Pods.
	//
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// runtimeClassName is the RuntimeClass member Pods run with.
	//
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// readinessGates are extra conditions a member Pod needs to be Ready.
	//
	// +optional
	ReadinessGates []corev1.PodReadinessGate `json:"readinessGates,omitempty"`

	// containers are merged by name into the member Pod: a container named
	// etcd overrides fields of the operator's etcd container (image,
	// imagePullPolicy, resources, env, probes, securityContext) but not its
	// command or args; any other container is added as a sidecar and needs an
	// image. etcd reads every ETCD_<FLAG> environment variable as a flag, so
	// the etcd container may not set variables starting with ETCD_ (except
	// ETCD_UNSUPPORTED_ARCH), and its envFrom needs a prefix that cannot
	// make such a name. It may not mount anything at, inside or above the
	// data directory /var/lib/etcd, and its mount paths must be clean
	// (no //, . or ..).
	//
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'etcd' || (!has(c.command) && !has(c.args)))",message="the etcd container's command and args are set by the operator: remove them and put etcd flags in spec.options"
	// +kubebuilder:validation:items:XValidation:rule="self.name != 'etcd' || !has(self.env) || self.env.all(e, !e.name.startsWith('ETCD_') || e.name == 'ETCD_UNSUPPORTED_ARCH')",message="the etcd container's env sets a variable starting with ETCD_: etcd reads ETCD_<FLAG> variables as flags, around the checks on spec.options and the flags the operator sets; remove it and put etcd flags in spec.options"
	// +kubebuilder:validation:items:XValidation:rule="self.name != 'etcd' || !has(self.envFrom) || self.envFrom.all(f, has(f.prefix) && !f.prefix.startsWith('ETCD_') && !(f.prefix in ['', 'E', 'ET', 'ETC', 'ETCD']))",message="the etcd container's envFrom could set variables starting with ETCD_, which etcd reads as flags around the checks on spec.options: give every envFrom entry a prefix that cannot begin a name with ETCD_ (for example APP_), or list the variables in env"
	// +kubebuilder:validation:items:XValidation:rule="self.name != 'etcd' || !has(self.volumeMounts) || self.volumeMounts.all(m, !m.mountPath.startsWith('/var/lib/etcd/') && !(m.mountPath in ['/', '/var', '/var/', '/var/lib', '/var/lib/', '/var/lib/etcd']))",message="the etcd container mounts a volume at, inside or above /var/lib/etcd, the data directory the operator mounts from spec.storage: etcd would keep its data elsewhere than the member's volume; mount it at another path"
	// +kubebuilder:validation:items:XValidation:rule="self.name != 'etcd' || !has(self.volumeMounts) || self.volumeMounts.all(m, m.mountPath.startsWith('/') && !m.mountPath.contains('//') && !m.mountPath.contains('/./') && !m.mountPath.contains('/../') && !m.mountPath.endsWith('/.') && !m.mountPath.endsWith('/..'))",message="the etcd container's volumeMounts: write each mountPath as a clean absolute path (starting with /, without //, . or ..) so that it cannot reach the data directory /var/lib/etcd by another spelling"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name == 'etcd' || has(c.image))",message="every container other than etcd is a sidecar and needs an image: only the etcd container may leave the image to the operator"
	// +optional
	Containers []corev1.Container `json:"containers,omitempty"`

	// volumes are added to member Pods, for use by sidecars or extra mounts.
	// Names starting with etcd- are reserved for the operator's volumes.
	//
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(v, !v.name.startsWith('etcd-'))",message="volume names starting with etcd- are reserved for the operator's volumes: rename the volume"
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
}

// ServiceTemplate is merged over the client Service of the cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.selector)",message="spec.serviceTemplate.spec.selector is set by the operator to select the cluster's members: remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.type) || self.spec.type != 'ExternalName'",message="spec.serviceTemplate.spec.type: an ExternalName Service cannot front the cluster's members; use ClusterIP, NodePort or LoadBalancer"
type ServiceTemplate struct {
	// metadata is added to the client Service.
	//
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is merged over the operator's client Service spec.
	//
	// +optional
	Spec corev1.ServiceSpec `json:"spec,omitempty"`
}

// HeadlessServiceTemplate sets metadata on the headless Service.
type HeadlessServiceTemplate struct {
	// metadata is added to the headless Service.
	//
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`
}

// PodDisruptionBudgetTemplate describes the PodDisruptionBudget of the
// members.
type PodDisruptionBudgetTemplate struct {
	// metadata is added to the PodDisruptionBudget.
	//
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec sets the budget. Empty means quorum-safe: minAvailable is
	// replicas/2 + 1.
	//
	// +optional
	Spec PodDisruptionBudgetSpec `json:"spec,omitempty"`
}

// PodDisruptionBudgetSpec is the budget of voluntary disruptions.
// Set one of minAvailable and maxUnavailable; both may be given only when
// they describe the same budget (minAvailable + maxUnavailable = replicas).
type PodDisruptionBudgetSpec struct {
	// minAvailable is how many members must stay available, as a number or
	// a percentage of replicas.
	//
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.podDisruptionBudgetTemplate.spec.minAvailable must be a non-negative number or a percentage from 0% to 100%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// maxUnavailable is how many members may be unavailable at once, as a
	// number or a percentage of replicas.
	//
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.podDisruptionBudgetTemplate.spec.maxUnavailable must be a non-negative number or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// SecuritySpec configures TLS and authentication.
type SecuritySpec struct {
	// tls turns on TLS: certManager has the operator issue every certificate
	// through cert-manager (peer and client traffic both encrypted, client
	// certificates required); the Secret fields name certificates the user
	// provides instead. Each certificate Secret has tls.crt and tls.key;
	// each CA Secret has ca.crt. Without tls, members talk plain HTTP. TLS
	// cannot be added, removed or changed on an existing cluster, except
	// for the issuers of certManager.
	//
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// enableAuth turns on etcd authentication: the operator creates the root
	// user and role and enables auth. Root authenticates by the CN of the
	// operator's client certificate when the operator has one
	// (tls.certManager or tls.clientSecret), otherwise by a generated
	// password kept in the Secret <cluster>-root-password. EtcdTenants
	// need it: while any EtcdTenant names the cluster, clearing enableAuth
	// leaves authentication on (the Authentication condition says
	// TenantsExist); it goes off once they are deleted.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enable Auth",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	EnableAuth bool `json:"enableAuth,omitempty"`
}

// TLSSpec asks for certificates issued by the operator through cert-manager
// (certManager), or names the Secrets holding user-provided certificates,
// each pair given together or not at all.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf || has(self.certManager) && has(oldSelf.certManager)",message="spec.security.tls cannot change on an existing cluster, apart from the issuers of certManager: the operator does not roll TLS changes member by member yet, and a half-applied change would cut members off from each other; create a new EtcdCluster with the TLS settings you want and move the data to it"
// +kubebuilder:validation:XValidation:rule="!has(self.certManager) || !(has(self.peerSecret) || has(self.peerTrustedCASecret) || has(self.serverSecret) || has(self.serverTrustedCASecret) || has(self.clientSecret) || has(self.clientTrustedCASecret))",message="spec.security.tls: certManager and the user-provided Secret fields (peerSecret, peerTrustedCASecret, serverSecret, serverTrustedCASecret, clientSecret, clientTrustedCASecret) exclude each other: remove certManager to bring your own certificates, or remove the Secret fields to have the operator issue them through cert-manager"
// +kubebuilder:validation:XValidation:rule="has(self.peerSecret) == has(self.peerTrustedCASecret)",message="spec.security.tls: peerSecret and peerTrustedCASecret go together: set both (the members' peer certificate and the CA that signed it) or neither"
// +kubebuilder:validation:XValidation:rule="has(self.serverSecret) == has(self.serverTrustedCASecret)",message="spec.security.tls: serverSecret and serverTrustedCASecret go together: set both (the members' serving certificate and the CA that signed it) or neither"
// +kubebuilder:validation:XValidation:rule="has(self.clientSecret) == has(self.clientTrustedCASecret)",message="spec.security.tls: clientSecret and clientTrustedCASecret go together: set both (the operator's client certificate and the CA members trust for clients) or neither"
// +kubebuilder:validation:XValidation:rule="!has(self.clientSecret) || has(self.serverSecret)",message="spec.security.tls: client certificates need TLS on the client port: set serverSecret and serverTrustedCASecret too"
type TLSSpec struct {
	// certManager has the operator issue the members' server and peer
	// certificates and its own client certificate through cert-manager,
	// into Secrets it owns, and renew them. Peer and client traffic are
	// both encrypted and members require client certificates. Needs
	// cert-manager (cert-manager.io/v1) installed.
	//
	// +optional
	CertManager *CertManagerSpec `json:"certManager,omitempty"`

	// peerTrustedCASecret is the Secret with ca.crt, the CA that signed the
	// members' peer certificates.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	PeerTrustedCASecret string `json:"peerTrustedCASecret,omitempty"`

	// peerSecret is the Secret with tls.crt and tls.key, the certificate
	// members present to each other.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	PeerSecret string `json:"peerSecret,omitempty"`

	// serverTrustedCASecret is the Secret with ca.crt, the CA that signed the
	// members' serving certificate; clients verify the members with it.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	ServerTrustedCASecret string `json:"serverTrustedCASecret,omitempty"`

	// serverSecret is the Secret with tls.crt and tls.key, the certificate
	// members serve clients with.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	ServerSecret string `json:"serverSecret,omitempty"`

	// clientTrustedCASecret is the Secret with ca.crt, the CA members trust
	// for client certificates; setting it turns on client certificate auth.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	ClientTrustedCASecret string `json:"clientTrustedCASecret,omitempty"`

	// clientSecret is the Secret with tls.crt and tls.key, the client
	// certificate the operator uses to reach the members (CN root when auth
	// is enabled).
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret in the cluster's namespace (lower case letters, digits, '-' and '.')"
	// +optional
	ClientSecret string `json:"clientSecret,omitempty"`
}

// CertManagerSpec says which cert-manager issuers sign the CAs of an
// operator-managed cluster. Every cluster has two CAs of its own, one for
// peer traffic and one for client traffic, and they sign every
// certificate of the cluster; its members trust them and nothing else, so
// that no certificate issued for another cluster, even by the same
// issuer, is an identity of this one. Without issuers, a self-signed
// Issuer signs them.
type CertManagerSpec struct {
	// issuerRef is the issuer that signs the cluster's client CA (an
	// intermediate CA of the issuer's, Certificate <cluster>-ca), which
	// signs the members' server certificates and the client certificates.
	// It must sign CA certificates (isCA): a CA issuer does; an ACME
	// issuer, or a Vault issuer on a pki/sign/<role> path, does not.
	// Without it the client CA is self-signed. It may change on an existing
	// cluster: the new issuer's CA is rolled out like a renewed one.
	//
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`

	// peerIssuerRef is the issuer that signs the cluster's peer CA
	// (Certificate <cluster>-peer-ca), which signs the members' peer
	// certificates; it must sign CA certificates as issuerRef must.
	// Without it the peer CA is self-signed. Peers and clients never
	// share a CA, so that a client certificate can never pass as a member.
	//
	// +optional
	PeerIssuerRef *IssuerReference `json:"peerIssuerRef,omitempty"`
}

// IssuerReference names a cert-manager issuer.
//
// +kubebuilder:validation:XValidation:rule="!has(self.group) || self.group != 'cert-manager.io' || !has(self.kind) || self.kind in ['Issuer', 'ClusterIssuer']",message="kind of a cert-manager.io issuer is Issuer (in the cluster's namespace) or ClusterIssuer"
type IssuerReference struct {
	// name is the name of the issuer.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind is Issuer (in the cluster's namespace) or ClusterIssuer, or the
	// kind of an external issuer. Defaults to Issuer.
	//
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:default=Issuer
	// +optional
	Kind string `json:"kind,omitempty"`

	// group is the API group of the issuer. Defaults to cert-manager.io.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=cert-manager.io
	// +optional
	Group string `json:"group,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// observedGeneration is the generation of the spec the status
	// reflects. The operator writes it last in a pass that read the
	// cluster's objects and etcd's member list and took its step towards
	// that spec, or refused it and says why in the conditions. It keeps
	// its value while no member answers (so it is absent until the cluster
	// forms), after a step that failed, and while the cluster is paused.
	// When it equals metadata.generation, the Ready and Progressing
	// conditions speak of the current spec.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions tell what the cluster is doing and what needs attention.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicas is the number of members in the etcd member list.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Replicas"
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of ready voters: members that have
	// started, vote, answered the operator's latest linearizable read and
	// whose Pods are Ready (condition Ready True, not being deleted).
	// Learners and members whose Pods are not Ready yet are not counted.
	// The READY column shows it, and the Ready condition's message
	// ("N of M members are ready voters") counts the same members.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Replicas"
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// updatedReplicas is the number of members whose Pods are built from
	// the current spec; the others are rolled one at a time.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Updated Replicas"
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// selector is the label selector of member Pods, for the scale
	// subresource.
	//
	// +optional
	Selector string `json:"selector,omitempty"`

	// clusterID is the etcd cluster ID, in hexadecimal.
	//
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// version is the etcd cluster version reported by the members.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Version"
	Version string `json:"version,omitempty"`

	// endpoints are the client URLs to reach the cluster at, for
	// consumers such as kube-apiserver's --etcd-servers: the client
	// Service, which stays whatever members come and go.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Endpoints"
	Endpoints []string `json:"endpoints,omitempty"`

	// caSecretName is the Secret whose ca.crt verifies the members'
	// serving certificates, when clients use TLS: the cluster's trust
	// bundle, which holds old and new CAs while a CA is replaced.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="CA Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CASecretName string `json:"caSecretName,omitempty"`

	// members are the etcd members as last observed.
	//
	// +listType=map
	// +listMapKey=name
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Members"
	Members []MemberStatus `json:"members,omitempty"`

	// recoveryPlan is, while the quorum is lost for good (condition
	// QuorumAvailable, reason QuorumLostForGood), how the cluster could be
	// rebuilt from its most advanced survivor and what that could lose:
	// the evidence for choosing between that and a restore from a backup
	// (docs/recovery.md). It is absent otherwise.
	//
	// +optional
	RecoveryPlan *RecoveryPlan `json:"recoveryPlan,omitempty"`

	// recovery is the rebuild of the cluster from the survivor of a quorum
	// lost for good: recorded when it was approved, before anything
	// changed, and kept once it is complete as the record of what was done
	// (condition Recovered).
	//
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
}

// RecoveryStatus is a rebuild of the cluster from one survivor.
type RecoveryStatus struct {
	// planID is the ID of the plan carried out (status.recoveryPlan.id when
	// it was approved).
	PlanID string `json:"planID"`

	// approvedBy says what approved it: the annotation
	// etcd.aenix.io/approve-recovery, or spec.recovery.quorumLoss
	// Automatic.
	ApprovedBy string `json:"approvedBy"`

	// survivor, survivorID and survivorRaftIndex are the plan's survivor:
	// the member whose snapshot the seed restores, which must have applied
	// up to that raft index first.
	Survivor          string `json:"survivor"`
	SurvivorID        string `json:"survivorID"`
	SurvivorRaftIndex int64  `json:"survivorRaftIndex"`

	// entriesAtRisk is the plan's bound on the raft entries other members
	// were seen holding that the survivor lacks.
	EntriesAtRisk int64 `json:"entriesAtRisk"`

	// fromClusterID is the etcd cluster ID before the rebuild; the rebuilt
	// cluster has a new one (status.clusterID).
	FromClusterID string `json:"fromClusterID"`

	// seed is the new member that restores the survivor's snapshot and
	// founds the rebuilt cluster; the other members join it.
	Seed string `json:"seed"`

	// retired are the Pods of the old cluster (the survivors and members
	// that did not answer), deleted once the seed serves.
	//
	// +listType=atomic
	// +optional
	Retired []string `json:"retired,omitempty"`

	// startedAt is when the rebuild was approved; completedAt when the
	// seed served and every Pod of the old cluster was gone.
	StartedAt   metav1.Time  `json:"startedAt"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// resumedAtRevision is the revision the seed restored: the rebuilt
	// cluster goes on from it.
	//
	// +optional
	ResumedAtRevision int64 `json:"resumedAtRevision,omitempty"`
}

// RecoveryPlan is how a cluster whose quorum is lost for good could be
// rebuilt from one survivor.
type RecoveryPlan struct {
	// id names this plan. It is a hash of the cluster ID, the survivor, its
	// raft index and the gone members, so it changes whenever any of them
	// does.
	ID string `json:"id"`

	// survivor is the member the cluster would be rebuilt from: of the
	// voters that answer, the one with the highest raft index, then the
	// highest raft term, then the lowest member ID.
	Survivor string `json:"survivor"`

	// survivorID is the survivor's etcd member ID in hexadecimal.
	SurvivorID string `json:"survivorID"`

	// raftIndex, raftTerm and appliedIndex are the survivor's raft
	// progress: the index of the last entry it holds, its term, and the
	// index of the last entry it applied.
	RaftIndex    int64 `json:"raftIndex"`
	RaftTerm     int64 `json:"raftTerm"`
	AppliedIndex int64 `json:"appliedIndex"`

	// highestRaftIndexSeen is the highest raft index the operator saw any
	// member of the cluster at (status.members keeps each member's last
	// one while the quorum is lost).
	HighestRaftIndexSeen int64 `json:"highestRaftIndexSeen"`

	// entriesAtRisk is highestRaftIndexSeen minus raftIndex: how many raft
	// entries (writes, and etcd's own entries) other members were seen
	// holding that the survivor lacks. Entries committed after the last
	// probe that reached a gone member are not counted.
	EntriesAtRisk int64 `json:"entriesAtRisk"`

	// gone are the voters whose data is gone, each with why.
	//
	// +listType=atomic
	Gone []string `json:"gone"`
}

// MemberStatus is one etcd member as last observed.
type MemberStatus struct {
	// name is the member name, which is also its Pod's name.
	Name string `json:"name"`

	// id is the etcd member ID in hexadecimal.
	//
	// +optional
	ID string `json:"id,omitempty"`

	// role is Leader, Follower or Learner.
	//
	// +kubebuilder:validation:Enum=Leader;Follower;Learner
	// +optional
	Role MemberRole `json:"role,omitempty"`

	// version is the etcd server version of the member.
	//
	// +optional
	Version string `json:"version,omitempty"`

	// healthy tells whether the member answered its last probe.
	//
	// +optional
	Healthy bool `json:"healthy,omitempty"`

	// peerURLs are the URLs other members reach this member on.
	//
	// +optional
	PeerURLs []string `json:"peerURLs,omitempty"`

	// clientURLs are the URLs clients reach this member on.
	//
	// +optional
	ClientURLs []string `json:"clientURLs,omitempty"`

	// dbSize is the size of the member's database file in bytes.
	//
	// +optional
	DBSize int64 `json:"dbSize,omitempty"`

	// dbSizeInUse is the part of dbSize holding live data; the rest is
	// freed by defragmentation.
	//
	// +optional
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`

	// raftTerm and raftIndex are the member's raft progress. While no
	// quorum answers, each member keeps the last ones a probe saw, so
	// the highest raft index the cluster reached stays known.
	//
	// +optional
	RaftTerm uint64 `json:"raftTerm,omitempty"`
	// +optional
	RaftIndex uint64 `json:"raftIndex,omitempty"`

	// alarms are the alarms the member raised (NOSPACE, CORRUPT).
	//
	// +listType=set
	// +optional
	Alarms []string `json:"alarms,omitempty"`

	// lastError is why the last probe of the member failed; empty when it
	// succeeded.
	//
	// +optional
	LastError string `json:"lastError,omitempty"`

	// lastProbeTime is when a probe last found the member as this entry
	// says. The operator probes every member every 10 seconds; while
	// nothing here changes, this time moves once every five minutes (as
	// the kubelet reports an unchanged node status), and a change shows at
	// once.
	//
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
}

// MemberRole is the role of a member in the etcd cluster.
type MemberRole string

// Member roles.
const (
	MemberRoleLeader   MemberRole = "Leader"
	MemberRoleFollower MemberRole = "Follower"
	MemberRoleLearner  MemberRole = "Learner"
)

// EtcdCluster is an etcd cluster run by the operator. Its name is at most
// 50 characters, starts with a letter and does not end in -headless or
// -peer (the operator's own objects end so). The namespace may be any
// length: where a name and namespace together would not fit (the CA
// common names, 64 characters), the operator shortens them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd,categories=all;etcd
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready voters: started voting members that answer and whose Pods are Ready"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 50",message="metadata.name must start with a letter, hold only lower case letters, digits and '-', and be at most 50 characters: members are named <name>-<n> and the headless Service <name>-headless, which must be DNS labels"
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.endsWith('-headless') && !self.metadata.name.endsWith('-peer')",message="metadata.name must not end in -headless or -peer: the operator names the objects of the cluster without that ending so (<name>-headless is its headless Service, <name>-peer-ca its peer CA), and this cluster would take them over; choose another name"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Cluster",resources={{Pod,v1},{Service,v1},{PersistentVolumeClaim,v1},{PodDisruptionBudget,v1},{Secret,v1}}
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the cluster.
	//
	// +optional
	Spec EtcdClusterSpec `json:"spec,omitempty"`

	// status is the observed state of the cluster.
	//
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdCluster.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
