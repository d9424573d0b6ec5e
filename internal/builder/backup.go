package builder

import (
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// LabelBackup is on the Pods of an EtcdBackup (its runners), with the
// backup's name. They do not carry etcd.aenix.io/cluster: the cluster's
// Services and PodDisruptionBudget select on it.
const LabelBackup = "etcd.aenix.io/backup"

// Mount points in a backup runner Pod.
const (
	backupTLSDir      = "/etc/etcd-backup/tls"
	backupPasswordDir = "/etc/etcd-backup/root"
	backupS3CADir     = "/etc/etcd-backup/s3-ca"
	backupScratchDir  = "/var/lib/etcd-backup"
	backupVolumeDir   = "/backup"
)

// BackupPodName is the name of attempt n (from 1) of backup b's runner:
// <backup>-attempt-<n>, which no member Pod (<cluster>-<n>) can take.
func BackupPodName(b *etcdv1alpha1.EtcdBackup, n int32) string {
	return b.Name + "-attempt-" + strconv.Itoa(int(n))
}

// DeleteBackupPodName is the name of the Pod that removes b's snapshot.
func DeleteBackupPodName(b *etcdv1alpha1.EtcdBackup) string { return b.Name + "-delete" }

// BackupRunnerPod is attempt n of backup b of cluster c: the operator's
// image running `manager backup run` against the members at endpoints,
// with the cluster's client credentials, the destination's, and for S3 a
// scratch volume of scratch bytes. It restarts never (the operator owns
// the retries), runs at most spec.timeout, and has no service account
// token: it talks to etcd and the store only.
func BackupRunnerPod(b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster, image string, n int32, endpoints []string, scratch int64) *corev1.Pod {
	args := []string{"backup", "run",
		"--namespace=" + b.Namespace, "--cluster=" + c.Name, "--backup-uid=" + string(b.UID),
		"--key=" + b.SnapshotKey(), "--endpoints=" + strings.Join(endpoints, ","),
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	mount := func(name, dir string, src corev1.VolumeSource) {
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: dir != backupScratchDir && dir != backupVolumeDir})
	}
	args = append(args, clientTLSArgs(c, mount)...)
	if !c.Spec.Security.OperatorClientCert() {
		// Root's password, when the cluster has one: optional, as the
		// Secret exists only once authentication was turned on.
		mount("root-password", backupPasswordDir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: RootPasswordSecretName(c), Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: corev1.BasicAuthPasswordKey, Path: "password"}},
		}})
		args = append(args, "--password-file="+path.Join(backupPasswordDir, "password"))
	}
	args = append(args, destinationArgs(b.Spec.Destination, mount, scratch)...)
	pod := backupPod(b, BackupPodName(b, n), image, args, volumes, mounts)
	pod.Spec.ActiveDeadlineSeconds = ptr.To(b.TimeoutSeconds())
	return pod
}

// clientTLSArgs mounts what a Pod needs to reach c's members as the
// operator does (the CA of their serving certificates, and the operator's
// client certificate when it has one) and returns the flags naming the
// files; none without client TLS.
func clientTLSArgs(c *etcdv1alpha1.EtcdCluster, mount func(name, dir string, src corev1.VolumeSource)) []string {
	if !c.Spec.Security.ClientTLS() {
		return nil
	}
	src := TLSSourcesOf(c)
	items := []SecretKey{src.ServerCA}
	args := []string{"--ca-file=" + path.Join(backupTLSDir, "ca", src.ServerCA.Key)}
	if c.Spec.Security.OperatorClientCert() {
		items = append(items, src.ClientCert, src.ClientKey)
		args = append(args, "--cert-file="+path.Join(backupTLSDir, "client", src.ClientCert.Key), "--key-file="+path.Join(backupTLSDir, "client", src.ClientKey.Key))
	}
	mount("tls", backupTLSDir, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: secretProjections(items)}})
	return args
}

// DeleteBackupPod removes backup b's snapshot from its destination, if
// the snapshot there is b's.
func DeleteBackupPod(b *etcdv1alpha1.EtcdBackup, image string) *corev1.Pod {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	mount := func(name, dir string, src corev1.VolumeSource) {
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: dir != backupVolumeDir && dir != backupScratchDir})
	}
	args := append([]string{"backup", "delete", "--key=" + b.SnapshotKey(), "--backup-uid=" + string(b.UID)}, destinationArgs(b.Spec.Destination, mount, 0)...)
	pod := backupPod(b, DeleteBackupPodName(b), image, args, volumes, mounts)
	pod.Spec.ActiveDeadlineSeconds = ptr.To(DeleteBackupTimeout)
	return pod
}

// DeleteBackupTimeout is how long, in seconds, the Pod that removes a
// snapshot may run: one request or two to the store.
const DeleteBackupTimeout int64 = 600

// destinationArgs are the runner's flags for d, mounting what it needs;
// a scratch volume of scratch bytes for S3 (0: unbounded, -1: none).
func destinationArgs(d etcdv1alpha1.BackupDestination, mount func(name, dir string, src corev1.VolumeSource), scratch int64) []string {
	if v := d.Volume; v != nil {
		mount("destination", backupVolumeDir, corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.ClaimName}})
		return []string{"--volume-root=" + backupVolumeDir, "--volume-claim=" + v.ClaimName}
	}
	s := d.S3
	args := []string{"--s3-endpoint=" + s.Endpoint, "--s3-bucket=" + s.Bucket, "--s3-region=" + s.Region, "--s3-addressing=" + s.Addressing}
	if s.CASecret != nil {
		key := s.CASecret.Key
		if key == "" {
			key = CAKey
		}
		mount("s3-ca", backupS3CADir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.CASecret.Name, Items: []corev1.KeyToPath{{Key: key, Path: "ca.crt"}}}})
		args = append(args, "--s3-ca-file="+path.Join(backupS3CADir, "ca.crt"))
	}
	if scratch < 0 {
		return args // no scratch: a restore fetches into the data directory
	}
	emptyDir := &corev1.EmptyDirVolumeSource{}
	if scratch > 0 {
		emptyDir.SizeLimit = resource.NewQuantity(scratch, resource.BinarySI)
	}
	mount("scratch", backupScratchDir, corev1.VolumeSource{EmptyDir: emptyDir})
	return append(args, "--scratch-dir="+backupScratchDir)
}

// secretProjections projects each SecretKey to <secret's role>/<key>: the
// CA under ca/, the client pair under client/.
func secretProjections(items []SecretKey) []corev1.VolumeProjection {
	var out []corev1.VolumeProjection
	for i, k := range items {
		dir := "client"
		if i == 0 {
			dir = "ca"
		}
		out = append(out, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: k.Secret},
			Items:                []corev1.KeyToPath{{Key: k.Key, Path: path.Join(dir, k.Key)}},
		}})
	}
	return out
}

// s3Env is the S3 credentials of b's destination as environment
// variables (none for a volume).
func s3Env(b *etcdv1alpha1.EtcdBackup) []corev1.EnvVar {
	env := []corev1.EnvVar{}
	if s := b.Spec.Destination.S3; s != nil {
		for _, k := range []struct {
			name     string
			optional bool
		}{{"AWS_ACCESS_KEY_ID", false}, {"AWS_SECRET_ACCESS_KEY", false}, {"AWS_SESSION_TOKEN", true}} {
			env = append(env, corev1.EnvVar{Name: k.name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.CredentialsSecret.Name}, Key: k.name, Optional: ptr.To(k.optional),
			}}})
		}
	}
	return env
}

// backupPod is what every Pod of an EtcdBackup shares.
func backupPod(b *etcdv1alpha1.EtcdBackup, name, image string, args []string, volumes []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: b.Namespace,
			Labels: map[string]string{
				labelName:      appName,
				labelInstance:  b.Spec.ClusterName,
				labelManagedBy: operatorName,
				labelComponent: "etcd-backup",
				LabelBackup:    b.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(b, etcdv1alpha1.GroupVersion.WithKind("EtcdBackup"))},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), FSGroup: ptr.To(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:                     "backup",
				Image:                    image,
				Command:                  []string{"/manager"},
				Args:                     args,
				Env:                      s3Env(b),
				VolumeMounts:             mounts,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: volumes,
		},
	}
}

// BackupScratchSize is the scratch volume of an S3 backup of a cluster
// whose largest member database is dbSize bytes: the snapshot is at most
// the database, plus room.
func BackupScratchSize(dbSize int64) int64 {
	return dbSize + dbSize/4 + 64<<20
}

// Mount points of a restoring seed's init containers.
const (
	restoreToolsDir = "/etcd-restore"
	restoreBinary   = restoreToolsDir + "/etcd-restore"
)

// Names of a restoring seed's init containers.
const (
	RestoreToolsContainer = "restore-tools"
	RestoreContainer      = "restore"
)

// WithRestore makes pod, the seed of new cluster c, restore the snapshot
// of backup b before etcd starts: restore-tools (the operator's image)
// copies the operator's binary into a shared emptyDir, then restore (the
// member's own etcd image, so that its etcdutl writes the data) runs it:
// fetch, check against b's status, restore under c's identity, set up
// authentication, move into place. It does nothing once the data
// directory holds member/.
func WithRestore(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup, image string) {
	r := newRestoreRun(pod, c)
	r.args = append(r.args,
		"--key="+b.Status.Key, "--size="+strconv.FormatInt(b.Status.Size, 10), "--sha256="+b.Status.SHA256,
		"--revision="+strconv.FormatInt(b.Status.Revision, 10))
	if c.Spec.Security.AuthEnabled() && !c.Spec.Security.OperatorClientCert() {
		r.mount("root-password", backupPasswordDir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: RootPasswordSecretName(c), Items: []corev1.KeyToPath{{Key: corev1.BasicAuthPasswordKey, Path: "password"}},
		}})
		r.args = append(r.args, "--password-file="+path.Join(backupPasswordDir, "password"))
	}
	r.args = append(r.args, destinationArgs(b.Spec.Destination, r.mount, -1)...)
	r.env = s3Env(b)
	r.addTo(pod, c, image, b.Name)
}

// WithRecovery makes pod, the seed of cluster c rebuilt from the survivor
// of a quorum lost for good (rec), restore the survivor's snapshot before
// etcd starts, as WithRestore does a backup's: the snapshot is streamed
// from the survivor (with the operator's client credentials), which must
// still be the plan's member of the old cluster and have applied the
// plan's raft index.
func WithRecovery(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, rec *etcdv1alpha1.RecoveryStatus, image string) {
	r := newRestoreRun(pod, c)
	r.args = append(r.args, "--survivor="+ClientURL(c, rec.Survivor), "--survivor-member-id="+rec.SurvivorID,
		"--survivor-cluster-id="+rec.FromClusterID, "--survivor-raft-index="+strconv.FormatInt(rec.SurvivorRaftIndex, 10))
	r.args = append(r.args, clientTLSArgs(c, r.mount)...)
	r.addTo(pod, c, image, "survivor "+rec.Survivor)
}

// restoreRun is the restore init container of a seed being built: its
// arguments, and the volumes it mounts.
type restoreRun struct {
	args    []string
	env     []corev1.EnvVar
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
}

// newRestoreRun starts the restore of seed pod of cluster c: the flags
// every restore has.
func newRestoreRun(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster) *restoreRun {
	return &restoreRun{args: []string{"restore", "run",
		"--data-dir=" + DataDir, "--name=" + pod.Name, "--peer-url=" + PeerURL(c, pod.Name), "--token=" + ClusterToken(c),
		"--etcdutl=etcdutl", "--auth-enabled=" + strconv.FormatBool(c.Spec.Security.AuthEnabled()),
	}}
}

// mount adds a read-only volume for the restore container.
func (r *restoreRun) mount(name, dir string, src corev1.VolumeSource) {
	name = "restore-" + name
	r.volumes = append(r.volumes, corev1.Volume{Name: name, VolumeSource: src})
	r.mounts = append(r.mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
}

// addTo adds the restore's init containers and volumes to pod, and the
// annotation that names what it restores from.
func (r *restoreRun) addTo(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, image, from string) {
	args, env, volumes, mounts := r.args, r.env, r.volumes, r.mounts
	tools := corev1.Volume{Name: "restore-tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	toolsMount := corev1.VolumeMount{Name: tools.Name, MountPath: restoreToolsDir}
	data := corev1.VolumeMount{Name: DataVolumeName, MountPath: DataDir}
	pod.Spec.Volumes = append(pod.Spec.Volumes, append(volumes, tools)...)
	// The etcd container's security context, so the restored files are
	// owned as etcd runs and a restricted namespace admits the Pod.
	var sc *corev1.SecurityContext
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == EtcdContainerName && ctr.SecurityContext != nil {
			sc = ctr.SecurityContext.DeepCopy()
		}
	}
	pod.Spec.InitContainers = append(pod.Spec.InitContainers,
		corev1.Container{
			Name: RestoreToolsContainer, Image: image,
			Command:                  []string{"/manager", "restore", "install", "--to=" + restoreBinary},
			VolumeMounts:             []corev1.VolumeMount{toolsMount},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          sc,
		},
		corev1.Container{
			Name: RestoreContainer, Image: EtcdImage(c),
			Command:                  []string{restoreBinary},
			Args:                     args,
			Env:                      env,
			VolumeMounts:             append([]corev1.VolumeMount{data, toolsMount}, mounts...),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          sc.DeepCopy(),
		})
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[etcdv1alpha1.AnnotationRestoredFrom] = from
}
