package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelBackupSchedule is on the EtcdBackups a schedule creates, with the
// schedule's name.
const LabelBackupSchedule = "etcd.aenix.io/backup-schedule"

// ConditionScheduleReady is the condition of an EtcdBackupSchedule: True
// while its schedule parses and its cluster exists.
const ConditionScheduleReady = "Ready"

// EtcdBackupScheduleSpec takes EtcdBackups of a cluster on a cron schedule
// and deletes old ones.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName cannot change: create a new EtcdBackupSchedule for another cluster"
type EtcdBackupScheduleSpec struct {
	// clusterName is the EtcdCluster to back up, in this namespace.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:etcd.aenix.io:v1alpha1:EtcdCluster"}
	ClusterName string `json:"clusterName"`

	// schedule in cron syntax, as a CronJob reads it: five fields (minute
	// hour day-of-month month day-of-week), such as "0 */6 * * *", or a
	// macro such as @hourly or @daily.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, f != '').size() == 5",message="spec.schedule needs five fields (minute hour day-of-month month day-of-week), as in a CronJob, such as \"0 */6 * * *\", or a macro such as @hourly"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Schedule"
	Schedule string `json:"schedule"`

	// timeZone is the IANA time zone of the schedule, such as
	// Europe/Berlin; defaults to UTC.
	//
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`

	// suspend stops new backups; retention still runs.
	//
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Suspend bool `json:"suspend,omitempty"`

	// destination, timeout and backoffLimit are those of every backup the
	// schedule takes (see EtcdBackup).
	Destination BackupDestination `json:"destination"`
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// retention deletes old backups of this schedule, with their
	// snapshots (the backups it creates have deletionPolicy Delete).
	//
	// +optional
	Retention BackupRetention `json:"retention,omitempty"`
}

// BackupRetention says which backups of a schedule are deleted. The
// newest successful backup is never deleted.
type BackupRetention struct {
	// keepLast is how many successful backups are kept, the newest.
	//
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`

	// maxAge deletes successful backups older than this (by completion).
	//
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// failedToKeep is how many failed backups are kept for inspection,
	// the newest; defaults to 3.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	FailedToKeep *int32 `json:"failedToKeep,omitempty"`
}

// EtcdBackupScheduleStatus is what the schedule did last and does next.
type EtcdBackupScheduleStatus struct {
	// conditions: Ready.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastScheduleTime is the scheduled time of the last run (taken or
	// skipped); nextScheduleTime the next one.
	//
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// lastSuccessfulTime is the completion time of the newest successful
	// backup of the schedule; lastBackup its name.
	//
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// +optional
	LastBackup string `json:"lastBackup,omitempty"`

	// activeBackup is the backup running now, if any.
	//
	// +optional
	ActiveBackup string `json:"activeBackup,omitempty"`
}

// EtcdBackupSchedule takes EtcdBackups of an EtcdCluster on a cron
// schedule and deletes those its retention no longer keeps. Backups it
// took are named <schedule>-<scheduled time in Unix minutes> and outlive
// it and the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackupschedule
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 43",message="metadata.name must be at most 43 characters: its backups are named <name>-<scheduled time in Unix minutes>, at most 52 characters"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Backup Schedule",resources={{EtcdBackup,v1alpha1}}
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupScheduleSpec   `json:"spec"`
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedules.
//
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}
