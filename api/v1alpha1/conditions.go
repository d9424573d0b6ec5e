package v1alpha1

// Condition types of an EtcdCluster.
const (
	// ConditionInitialized is True once the cluster has bootstrapped: every
	// founding member joined and the cluster has an etcd cluster ID.
	ConditionInitialized = "Initialized"

	// ConditionReady is True when the cluster has as many members as
	// spec.replicas, all of them ready voters (status.readyReplicas counts
	// them: started voters that answer linearizable reads and whose Pods
	// are Ready).
	ConditionReady = "Ready"

	// ConditionProgressing is True while the operator changes the cluster;
	// its reason names the step and its message what it waits for.
	ConditionProgressing = "Progressing"

	// ConditionQuorumAvailable is True while a quorum of voting members
	// answers linearizable reads: the cluster serves writes.
	ConditionQuorumAvailable = "QuorumAvailable"

	// ConditionDegraded is True when a member is unhealthy, or members
	// answer for different clusters; the message names them and why.
	ConditionDegraded = "Degraded"

	// ConditionAlarm is True while a member has raised an alarm (NOSPACE,
	// CORRUPT); the reason names the alarms.
	ConditionAlarm = "Alarm"

	// ConditionAuthentication is True while etcd authentication is on, as
	// spec.security.enableAuth asks, and False while it is off as asked
	// (from the start: a cluster that has not formed has it off), or
	// (reason TenantsExist) while the operator keeps it on against the
	// spec because EtcdTenants name the cluster. It is Unknown while the
	// spec asks for it and the cluster has not formed (NotFormed), or no
	// member answers (Unreachable). Clusters with TLS have it once their
	// certificates are ready.
	ConditionAuthentication = "Authentication"

	// ConditionMaintenance is True while the operator compacts and
	// defragments the members' databases.
	ConditionMaintenance = "Maintenance"

	// ConditionCertificatesReady is True when every certificate the
	// cluster's TLS settings call for is in its Secret and valid; its
	// message names the nearest expiry, or what is missing. Only clusters
	// with TLS have it, and their member Pods are created only while it is
	// True.
	ConditionCertificatesReady = "CertificatesReady"

	// ConditionCATrusted is True when every member Pod was started with
	// the CAs of the cluster's current trust bundle (old and new ones);
	// while it is False members are being restarted to trust them, and a
	// renewed CA of the operator's own signs nothing yet. Only clusters
	// with TLS have it.
	ConditionCATrusted = "CATrusted"

	// ConditionConfigurationWarning is True when the spec is accepted but
	// part of it is ignored or questionable; the message says what to change.
	ConditionConfigurationWarning = "ConfigurationWarning"

	// ConditionRestored is on clusters created with
	// spec.bootstrap.restore: Unknown while the seed restores, False
	// when the restore cannot start or failed (the reason says why: the
	// source, or a snapshot that does not check), True once the restored
	// cluster has formed.
	ConditionRestored = "Restored"

	// ConditionRecovered is present once a rebuild from the survivor of a
	// quorum lost for good was asked for: False with reason StalePlan
	// when the approval names another plan than the current one (or
	// RecoveryImpossible when the cluster cannot be rebuilt so), Unknown
	// while the rebuild runs, True once it is complete.
	ConditionRecovered = "Recovered"
)

// Reasons of the Recovered condition.
const (
	ReasonStalePlan             = "StalePlan"
	ReasonRecoveryImpossible    = "RecoveryImpossible"
	ReasonRecovering            = "Recovering"
	ReasonRecoveredFromSurvivor = "RecoveredFromSurvivor"
)

// Reasons of the Restored condition.
const (
	ReasonRestoring        = "Restoring"
	ReasonRestored         = "Restored"
	ReasonSourceNotFound   = "SourceNotFound"
	ReasonSourceNotReady   = "SourceNotReady"
	ReasonRestoreImageless = "OperatorImageUnknown"
)

// Condition reasons of an EtcdCluster, by condition. A reason shared by
// several conditions is listed under the first.
const (
	// ReasonBootstrapping (Initialized): the cluster has not formed yet.
	ReasonBootstrapping = "Bootstrapping"
	// ReasonFormed (Initialized): the cluster has formed.
	ReasonFormed = "Formed"
	// ReasonUnreachable (Initialized, Ready, QuorumAvailable, Degraded,
	// Alarm, Authentication): no member answers; the message says why.
	ReasonUnreachable = "Unreachable"

	// ReasonAllMembersReady (Ready): every member is a ready voter.
	ReasonAllMembersReady = "AllMembersReady"
	// ReasonNotReady (Ready): some members are not ready voters.
	ReasonNotReady = "NotReady"
	// ReasonClusterIDMismatch (Ready, Progressing): members answer for
	// different etcd clusters.
	ReasonClusterIDMismatch = "ClusterIDMismatch"
	// ReasonDataLost (Ready, Progressing): every member and its data are
	// gone.
	ReasonDataLost = "DataLost"
	// ReasonMemberPodRefused (Ready, Progressing): the API server refused a
	// member's Pod or claim (admission, quota, a missing PriorityClass);
	// the operator retries until the cause is gone.
	ReasonMemberPodRefused = "MemberPodRefused"
	// ReasonObjectRefused (Ready, Progressing; CertificatesReady): the API
	// server refused an object the operator creates or updates for the
	// cluster other than a member's Pod or claim (a Service, the
	// PodDisruptionBudget; a cert-manager Issuer or Certificate, a Secret
	// of the PKI): admission, quota, validation. The message names the
	// object and gives the API server's; the operator retries until the
	// cause is gone.
	ReasonObjectRefused = "ObjectRefused"
	// ReasonForeignObject (Ready, Progressing; CertificatesReady): an object
	// the operator would create for the cluster exists and belongs to
	// someone else; the operator never takes it over.
	ReasonForeignObject = "ForeignObject"

	// ReasonStable (Progressing): membership matches spec.replicas. While
	// the operator changes the cluster, the reason names its step.
	ReasonStable = "Stable"
	// ReasonPaused (Progressing, Maintenance): the annotation
	// AnnotationPaused stops the operator.
	ReasonPaused = "Paused"
	// ReasonUpgradeRefused (Progressing): the image's etcd version cannot
	// replace the running one.
	ReasonUpgradeRefused = "UpgradeRefused"

	// ReasonQuorumHealthy (QuorumAvailable): a quorum of voters answers.
	ReasonQuorumHealthy = "QuorumHealthy"
	// ReasonQuorumLost (QuorumAvailable): fewer voters than a quorum
	// answer.
	ReasonQuorumLost = "QuorumLost"
	// ReasonQuorumLostForGood (QuorumAvailable): more voters are gone
	// with their data (Pod gone, and its emptyDir or claim with it) than
	// the cluster can lose; the message names them and the survivors.
	ReasonQuorumLostForGood = "QuorumLostForGood"

	// ReasonAllMembersHealthy (Degraded): every member is healthy.
	ReasonAllMembersHealthy = "AllMembersHealthy"
	// ReasonMembersUnhealthy (Degraded): the message names the unhealthy
	// members.
	ReasonMembersUnhealthy = "MembersUnhealthy"

	// ReasonNoAlarms (Alarm): no member raised an alarm. While one is
	// raised, the reason names the alarms.
	ReasonNoAlarms = "NoAlarms"
	// ReasonAlarmsUnknown (Alarm): the alarms could not be listed.
	ReasonAlarmsUnknown = "AlarmsUnknown"

	// ReasonIdle (Maintenance): nothing to compact or defragment. While
	// the operator does, the reason names the step.
	ReasonIdle = "Idle"
	// ReasonRequestHeld (Maintenance): a request of the annotations
	// AnnotationMoveLeader or AnnotationDefragment cannot be carried out
	// yet; the message says why and how to cancel it.
	ReasonRequestHeld = "RequestHeld"
	// ReasonDisabled (Maintenance, Authentication): the spec turns it off.
	ReasonDisabled = "Disabled"

	// ReasonEnabled (Authentication): etcd authentication is on.
	ReasonEnabled = "Enabled"
	// ReasonNotFormed (Authentication): the spec asks for authentication
	// and the cluster has not formed yet; it is turned on once it has.
	ReasonNotFormed = "NotFormed"
	// ReasonTenantsExist (Authentication): spec.security.enableAuth is
	// false but etcd authentication stays on, because EtcdTenants name the
	// cluster and turning it off would open their keys to every client;
	// the message names them. It goes off once they are gone.
	ReasonTenantsExist = "TenantsExist"

	// ReasonCertificatesReady (CertificatesReady): every certificate is in
	// its Secret and valid.
	ReasonCertificatesReady = "CertificatesReady"
	// ReasonSecretInvalid (CertificatesReady): a Secret is missing, lacks
	// a key or holds something that is not a valid certificate or key.
	ReasonSecretInvalid = "SecretInvalid"
	// ReasonIssuing (CertificatesReady, and an EtcdTenant's Ready):
	// cert-manager has not issued every certificate yet.
	ReasonIssuing = "Issuing"
	// ReasonCertManagerMissing (CertificatesReady): the cert-manager API is
	// not installed.
	ReasonCertManagerMissing = "CertManagerMissing"
	// ReasonIssuerCannotSignCA (CertificatesReady): the issuer named by
	// certManager.issuerRef or peerIssuerRef failed to issue the cluster's
	// own CA, or issued a certificate that cannot sign; the message names
	// the issuer and what to do.
	ReasonIssuerCannotSignCA = "IssuerCannotSignCA"
	// ReasonSharedClientCA (CertificatesReady, and a Warning event): the
	// CA in clientTrustedCASecret is one another EtcdCluster already
	// trusts for clients, so a client certificate made for one would
	// authenticate on the other. A cluster that has not formed is refused;
	// one that runs is warned.
	ReasonSharedClientCA = "SharedClientCA"

	// ReasonAllMembersTrust (CATrusted): every member Pod started with the
	// current trust bundle.
	ReasonAllMembersTrust = "AllMembersTrust"
	// ReasonRollingOut (CATrusted): some member Pods started with an older
	// bundle and are being restarted one at a time.
	ReasonRollingOut = "RollingOut"
	// ReasonTrustUnknown (CATrusted): the trust bundle cannot be gathered;
	// the message says why.
	ReasonTrustUnknown = "TrustUnknown"

	// ReasonNoWarnings (ConfigurationWarning): nothing in the spec is
	// ignored.
	ReasonNoWarnings = "NoWarnings"
	// ReasonEmptyDirIgnored (ConfigurationWarning): both storage kinds are
	// set and emptyDir is ignored in favour of volumeClaimTemplate.
	ReasonEmptyDirIgnored = "EmptyDirIgnored"
	// ReasonClaimsNotExpandable (ConfigurationWarning): the claims cannot
	// grow to the template's size.
	ReasonClaimsNotExpandable = "ClaimsNotExpandable"
	// ReasonVolumeTooSmall (ConfigurationWarning): spec.options'
	// quota-backend-bytes or max-wals need more than a member's volume
	// holds (EtcdCluster.VolumeNeeded).
	ReasonVolumeTooSmall = "VolumeTooSmall"
)

// Reasons of an EtcdTenant's Ready condition (and ReasonIssuing).
// ClusterNotFound, AuthDisabled, WaitingForAuth, NoIssuer and
// PrefixOverlap are refusals: while one lasts the tenant holds no etcd
// user or role. Issuing and EtcdUnreachable are waits that leave what
// etcd holds as it is.
const (
	// ReasonTenantReady: the tenant's user, role and connection Secret are
	// in place.
	ReasonTenantReady = "Ready"
	// ReasonClusterNotFound: the tenant's cluster does not exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonAuthDisabled: etcd authentication is off on the cluster, as
	// its spec asks.
	ReasonAuthDisabled = "AuthDisabled"
	// ReasonWaitingForAuth: the cluster's spec asks for authentication but
	// etcd does not have it on yet.
	ReasonWaitingForAuth = "WaitingForAuth"
	// ReasonNoIssuer: the cluster has no issuer for client certificates.
	ReasonNoIssuer = "NoIssuer"
	// ReasonPrefixOverlap: the tenant's key prefix overlaps another
	// tenant's.
	ReasonPrefixOverlap = "PrefixOverlap"
	// ReasonEtcdUnreachable: the cluster's members do not answer.
	ReasonEtcdUnreachable = "EtcdUnreachable"
	// ReasonRevokeFailed: the tenant's user could not be removed from etcd.
	ReasonRevokeFailed = "RevokeFailed"
)
