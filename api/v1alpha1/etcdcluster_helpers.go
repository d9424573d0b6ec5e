package v1alpha1

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultReplicas is the number of members of a cluster that does not say.
const DefaultReplicas int32 = 3

// DefaultUnhealthyMemberTimeout is spec.unhealthyMemberTimeout when unset.
const DefaultUnhealthyMemberTimeout = 5 * time.Minute

// AnnotationPodSpecHash is the annotation that holds, on a member Pod, the
// hash of what shapes every member's Pod when it was built; the operator
// rolls Pods whose hash is not the spec's.
const AnnotationPodSpecHash = "etcd.aenix.io/pod-spec-hash"

// AnnotationTrustBundleHash is the annotation that holds, on a member
// Pod, the hash of the trust bundle it was started with: etcd reads the
// CAs it trusts only when it starts, so a Pod with another hash than the
// bundle's is rolled.
const AnnotationTrustBundleHash = "etcd.aenix.io/trust-bundle-hash"

// AnnotationInitialClusterState is the annotation that holds, on a member
// Pod, etcd's --initial-cluster-state: "new" on the seed until the cluster
// has formed, "existing" on every other member and on the seed after. etcd
// reads it from the Pod each time its container starts (the downward API),
// so a seed whose data is wiped later can never found a new cluster.
const AnnotationInitialClusterState = "etcd.aenix.io/initial-cluster-state"

// AnnotationInitialCluster is the annotation that holds, on a member Pod,
// etcd's --initial-cluster, which etcd reads from the Pod each time its
// container starts (the downward API). A member with data ignores it; one
// whose data was lost under its running Pod fetches the cluster from the
// peers it names and must name exactly the members etcd has, so the
// operator keeps it equal to the member list on the Pod of every member
// that joined: such a member then rejoins however the members changed
// since its Pod was created (a roll replaces every one of them).
const AnnotationInitialCluster = "etcd.aenix.io/initial-cluster"

// AnnotationLearnerProgress is the annotation that holds, on the Pod of
// a learner, the highest raft applied index the operator has seen the
// learner at and when it first saw it there ("INDEX@RFC3339"). A learner
// that makes no progress for 5 minutes (or spec.unhealthyMemberTimeout
// when longer), counted from this time or its Pod's creation, is removed;
// one that advances is kept however long it takes to catch up.
const AnnotationLearnerProgress = "etcd.aenix.io/learner-progress"

// AnnotationDefragmenting is the annotation that holds, on a member's Pod,
// when the operator began to defragment it (RFC 3339). etcd serves
// nothing while it defragments, so the member looks unhealthy; for
// DefragmentBudget from that time the operator does not replace it for
// that. The operator removes it when the defragmentation ends, and on
// its next pass if it stopped in between.
const AnnotationDefragmenting = "etcd.aenix.io/defragmenting"

// DefaultQuotaBackendBytes is etcd's own default quota of its database.
const DefaultQuotaBackendBytes = 2 << 30

// slowDiskBytesPerSecond is the rate DefragmentBudget counts on: a slow
// network disk. (A 1.1 GB database took 13 s on the project's 2-core test
// machine, about 85 MB/s.)
const slowDiskBytesPerSecond = 10 << 20

// minDefragmentBudget is the least DefragmentBudget.
const minDefragmentBudget = time.Minute

// QuotaBackendBytes is the quota of the members' databases:
// spec.options' quota-backend-bytes, else the most a member's volume
// holds (VolumeQuota), else etcd's default.
func (c *EtcdCluster) QuotaBackendBytes() int64 {
	if v, ok := c.Spec.Options["quota-backend-bytes"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	if q, ok := c.VolumeQuota(); ok {
		return q
	}
	return DefaultQuotaBackendBytes
}

// walSegmentBytes is the size of one etcd write-ahead log file, which
// etcd preallocates in full.
const walSegmentBytes = 64_000_000

// defaultMaxWALs is etcd's --max-wals: how many released write-ahead log
// files it keeps.
const defaultMaxWALs = 5

// volumeSlackBytes is room on a member's volume for snapshot files and
// the file system's own use.
const volumeSlackBytes = 8 << 20

// minQuotaBytes is the least quota VolumeQuota gives, the one the schema
// makes room for when options set max-wals.
const minQuotaBytes = 16 << 20

// WALBytes is the most a member's write-ahead log takes on its volume
// besides the database: the max-wals files etcd keeps (spec.options or
// etcd's 5) and the one it preallocates, 64 MB each, and room for
// snapshot files.
func (c *EtcdCluster) WALBytes() int64 {
	wals := int64(defaultMaxWALs)
	if v, ok := c.Spec.Options["max-wals"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			wals = n
		}
	}
	return (wals+1)*walSegmentBytes + volumeSlackBytes
}

// VolumeBytes is the size of each member's volume: the claim's storage
// request, or the emptyDir's sizeLimit; false when unbounded.
func (c *EtcdCluster) VolumeBytes() (int64, bool) {
	s := c.Spec.Storage
	if t := s.VolumeClaimTemplate; t != nil {
		if q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			return q.Value(), true
		}
		return 0, false
	}
	if s.EmptyDir != nil && s.EmptyDir.SizeLimit != nil {
		return s.EmptyDir.SizeLimit.Value(), true
	}
	return 0, false
}

// VolumeNeeded is the least size of a member's volume for the quota
// and the write-ahead log files it keeps: WALBytes and the database
// twice.
func (c *EtcdCluster) VolumeNeeded() int64 {
	return c.WALBytes() + 2*c.QuotaBackendBytes()
}

// VolumeQuota is the largest database quota a member's bounded volume
// holds: besides the write-ahead log (WALBytes), the database twice,
// because a defragmentation writes a copy before it drops the old file
// and a member receiving a snapshot holds both the same way. It is at
// most etcd's default quota; false when the volume is unbounded. A
// database that reaches the quota raises etcd's NOSPACE alarm, which the
// operator clears; a volume that fills up crashes the member instead.
func (c *EtcdCluster) VolumeQuota() (int64, bool) {
	size, ok := c.VolumeBytes()
	if !ok {
		return 0, false
	}
	return min(DefaultQuotaBackendBytes, max(minQuotaBytes, (size-c.WALBytes())/2)), true
}

// DefragmentBudget is how long one member's defragmentation may take: a
// database as large as the quota rewritten at 10 MiB/s, at least a
// minute. etcd answers neither probes nor clients meanwhile, so the
// member's liveness probe tolerates that long, the operator waits that
// long for it and does not replace the member for being unhealthy while
// it defragments (AnnotationDefragmenting).
func (c *EtcdCluster) DefragmentBudget() time.Duration {
	return max(minDefragmentBudget, time.Duration(c.QuotaBackendBytes()/slowDiskBytesPerSecond)*time.Second)
}

// AnnotationPaused is the annotation that, set to "true" on an EtcdCluster,
// stops the operator from changing anything of the cluster (membership,
// Pods, maintenance) until it is removed; the status keeps being reported.
const AnnotationPaused = "etcd.aenix.io/paused"

// AnnotationRestoredFrom is on the seed Pod of a cluster restored from a
// backup (the EtcdBackup's name) or rebuilt from the survivor of a lost
// quorum ("survivor <member>"). Its init containers restore the
// snapshot.
const AnnotationRestoredFrom = "etcd.aenix.io/restored-from"

// AnnotationApproveRecovery is the annotation that, set on an EtcdCluster
// whose quorum is lost for good to the ID of the plan in
// status.recoveryPlan, approves rebuilding the cluster from that plan's
// survivor. An ID of another plan (the survivors or the gone members
// changed since it was read) is refused with condition Recovered, reason
// StalePlan, and nothing happens.
const AnnotationApproveRecovery = "etcd.aenix.io/approve-recovery"

// QuorumLossPolicy is spec.recovery.quorumLoss, Manual when unset.
func (c *EtcdCluster) QuorumLossPolicy() QuorumLossPolicy {
	if c.Spec.Recovery == nil || c.Spec.Recovery.QuorumLoss == "" {
		return QuorumLossManual
	}
	return c.Spec.Recovery.QuorumLoss
}

// Recovering tells whether a rebuild from a survivor was approved and is
// not complete.
func (c *EtcdCluster) Recovering() bool {
	return c.Status.Recovery != nil && c.Status.Recovery.CompletedAt == nil
}

// IsPaused tells whether the operator must leave the cluster alone.
func (c *EtcdCluster) IsPaused() bool {
	return c.Annotations[AnnotationPaused] == "true"
}

// AnnotationMoveLeader is the annotation that, set on an EtcdCluster to
// the name of one of its members, asks the operator to move etcd's
// leadership to that member. The operator removes it once that member
// leads. While the member cannot lead (unknown, a learner, not started,
// unhealthy) the request waits and the Maintenance condition says why.
const AnnotationMoveLeader = "etcd.aenix.io/move-leader"

// AnnotationDefragment is the annotation that, set on an EtcdCluster to
// the name of one of its members or to DefragmentAll, asks the operator
// to defragment that member, or every voting member one at a time
// (followers first, the leader last). The operator removes it when done.
const AnnotationDefragment = "etcd.aenix.io/defragment"

// DefragmentAll is the value of AnnotationDefragment that asks for every
// voting member.
const DefragmentAll = "all"

// AnnotationDefragmented is the annotation the operator keeps while it
// carries out AnnotationDefragment=all: the members it has defragmented
// for that request so far, comma-separated, so that a restarted operator
// goes on with the others. It is removed with the request.
const AnnotationDefragmented = "etcd.aenix.io/defragmented"

// AnnotationStartEmpty is the annotation that, set on an EtcdCluster to
// the cluster ID in its status, lets the operator found a new, empty etcd
// cluster after every member and its data are gone. Without it the operator refuses: an empty
// cluster in place of a lost one would look healthy and hold nothing.
const AnnotationStartEmpty = "etcd.aenix.io/start-empty-after-loss"

// Limits on the names of EtcdClusters and EtcdTenants. The schema rules on
// metadata.name (etcdcluster_types.go, etcdtenant_types.go) say the same;
// internal/pki's name tests check every derived name against them.
const (
	// MaxClusterNameLength keeps every name the operator derives from a
	// cluster's a DNS label and every label value valid: members are
	// <name>-<n> and the headless Service <name>-headless (at most 63
	// characters each).
	MaxClusterNameLength = 50

	// MaxTenantNameLength keeps a tenant's etcd user, tenant-<name>, within
	// the 64 characters of its client certificate's common name (and the
	// name itself a label value).
	MaxTenantNameLength = 57
)

// ReservedClusterNameSuffixes are the endings a cluster's name may not
// have, because the operator names another cluster's objects with them:
// cluster foo-headless's client Service would be cluster foo's headless
// Service (foo-headless), and cluster foo-peer's client CA foo's peer CA
// (foo-peer-ca, and its Issuer and signing Secret).
var ReservedClusterNameSuffixes = []string{"-headless", "-peer"}

// Labels the operator puts on every object it creates for a cluster.
const (
	// LabelCluster names the EtcdCluster an object belongs to.
	LabelCluster = "etcd.aenix.io/cluster"

	// LabelTenant names the EtcdTenant an object belongs to.
	LabelTenant = "etcd.aenix.io/tenant"

	// LabelMember names the member a Pod or PersistentVolumeClaim belongs to.
	LabelMember = "etcd.aenix.io/member"
)

// DesiredReplicas is spec.replicas, or DefaultReplicas when it is unset (as
// it is only for objects that did not go through the API server).
func (c *EtcdCluster) DesiredReplicas() int32 {
	if c.Spec.Replicas == nil {
		return DefaultReplicas
	}
	return *c.Spec.Replicas
}

// UnhealthyMemberTimeout is how long a member may stay unhealthy before
// it is replaced.
func (c *EtcdCluster) UnhealthyMemberTimeout() time.Duration {
	if c.Spec.UnhealthyMemberTimeout == nil {
		return DefaultUnhealthyMemberTimeout
	}
	return c.Spec.UnhealthyMemberTimeout.Duration
}

// Defragmentation defaults of spec.maintenance.
const (
	DefaultFragmentationThresholdPercent int32 = 50
	DefaultMinDefragmentationSize        int64 = 64 << 20
)

// DefragmentationEnabled tells whether the operator compacts, defragments
// and disarms NOSPACE alarms.
func (c *EtcdCluster) DefragmentationEnabled() bool {
	m := c.Spec.Maintenance
	return m == nil || m.Defragmentation == nil || *m.Defragmentation
}

// FragmentationThresholdPercent is the free share of a database that
// calls for defragmentation.
func (c *EtcdCluster) FragmentationThresholdPercent() int32 {
	if m := c.Spec.Maintenance; m != nil && m.FragmentationThresholdPercent != nil {
		return *m.FragmentationThresholdPercent
	}
	return DefaultFragmentationThresholdPercent
}

// MinDefragmentationSize is the database size below which fragmentation
// alone does not call for defragmentation.
func (c *EtcdCluster) MinDefragmentationSize() int64 {
	if m := c.Spec.Maintenance; m != nil && m.MinDefragmentationSize != nil {
		return m.MinDefragmentationSize.Value()
	}
	return DefaultMinDefragmentationSize
}

// Quorum is the number of voting members that must agree for a cluster of
// n voting members to make progress. It is the one definition: the default
// disruption budget, the health conditions and the membership safety rules
// of internal/etcd all use it.
func Quorum[N ~int | ~int32](n N) N {
	return n/2 + 1
}

// UsesPersistentStorage tells whether members get a PersistentVolumeClaim
// (volumeClaimTemplate set) rather than an emptyDir.
func (s StorageSpec) UsesPersistentStorage() bool {
	return s.VolumeClaimTemplate != nil
}

// EmptyDirIgnored tells whether emptyDir is set but loses to
// volumeClaimTemplate.
func (s StorageSpec) EmptyDirIgnored() bool {
	return s.EmptyDir != nil && s.VolumeClaimTemplate != nil
}

// DisruptionBudget returns the PodDisruptionBudget bounds a template asks
// for, exactly one of which is set. An empty template is quorum-safe:
// minAvailable is the quorum of replicas. When both bounds are given (the
// schema only accepts that when they agree), minAvailable is used.
func (t PodDisruptionBudgetTemplate) DisruptionBudget(replicas int32) (minAvailable, maxUnavailable *intstr.IntOrString) {
	switch {
	case t.Spec.MinAvailable != nil:
		v := *t.Spec.MinAvailable
		return &v, nil
	case t.Spec.MaxUnavailable != nil:
		v := *t.Spec.MaxUnavailable
		return nil, &v
	default:
		v := intstr.FromInt32(Quorum(replicas))
		return &v, nil
	}
}

// ManagedTLS tells whether the operator issues the cluster's certificates
// through cert-manager.
func (s *SecuritySpec) ManagedTLS() bool {
	return s != nil && s.TLS != nil && s.TLS.CertManager != nil
}

// UserTLS tells whether the cluster uses certificates the user provides in
// Secrets.
func (s *SecuritySpec) UserTLS() bool {
	return !s.ManagedTLS() && (s.PeerTLS() || s.ClientTLS())
}

// ClientTLS tells whether members serve clients over TLS.
func (s *SecuritySpec) ClientTLS() bool {
	return s.ManagedTLS() || s != nil && s.TLS != nil && s.TLS.ServerSecret != ""
}

// PeerTLS tells whether members talk to each other over TLS.
func (s *SecuritySpec) PeerTLS() bool {
	return s.ManagedTLS() || s != nil && s.TLS != nil && s.TLS.PeerSecret != ""
}

// ClientCertAuth tells whether members require client certificates.
func (s *SecuritySpec) ClientCertAuth() bool {
	return s.ManagedTLS() || s != nil && s.TLS != nil && s.TLS.ClientTrustedCASecret != ""
}

// TLSEnabled tells whether any traffic of the cluster uses TLS, so its
// certificates must be ready before members start.
func (s *SecuritySpec) TLSEnabled() bool {
	return s.PeerTLS() || s.ClientTLS()
}

// OperatorClientCert tells whether the operator has a client certificate
// of the cluster's (operator-managed, or tls.clientSecret): it is then root
// by its CN; otherwise root authenticates by password.
func (s *SecuritySpec) OperatorClientCert() bool {
	return s.ManagedTLS() || s != nil && s.TLS != nil && s.TLS.ClientSecret != ""
}

// AuthEnabled tells whether etcd authentication is asked for.
func (s *SecuritySpec) AuthEnabled() bool {
	return s != nil && s.EnableAuth
}
