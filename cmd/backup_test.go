package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// TestPodsCallTheirCommandsRight builds the runner, delete and restore
// containers the operator creates, for each destination, and runs this
// binary's entry points with their arguments (pointed at nothing that
// answers, and at a temporary data directory): each parses its flags,
// runs, and leaves a result, never a usage message.
func TestPodsCallTheirCommandsRight(t *testing.T) {
	destinations := map[string]etcdv1alpha1.BackupDestination{
		"s3": {S3: &etcdv1alpha1.S3Destination{Endpoint: "http://127.0.0.1:1", Bucket: "bkp", Prefix: "p", CredentialsSecret: etcdv1alpha1.LocalObjectReference{Name: "s3"},
			CASecret: &etcdv1alpha1.SecretKeySelector{Name: "ca"}}},
		"volume": {Volume: &etcdv1alpha1.VolumeDestination{ClaimName: "backups", Path: "etcd"}},
	}
	for name, dest := range destinations {
		t.Run(name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "cuid"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
				Security: &etcdv1alpha1.SecuritySpec{EnableAuth: true}}}
			b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "buid"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: dest},
				Status: etcdv1alpha1.EtcdBackupStatus{Key: "p/ns/db/b.db", Size: 4128, SHA256: "ab", Revision: 5}}
			seed := builder.MemberPod(c, builder.Member{Name: "db-0", ClusterState: builder.ClusterStateNew})
			builder.WithRestore(seed, c, b, "operator")
			recoverySeed := builder.MemberPod(c, builder.Member{Name: "db-3", ClusterState: builder.ClusterStateNew})
			builder.WithRecovery(recoverySeed, c, &etcdv1alpha1.RecoveryStatus{Survivor: "db-1", SurvivorID: "8e9e05c52164694d", FromClusterID: "cdf818194e3a8c32", SurvivorRaftIndex: 42}, "operator")
			restoreContainer := func(p *corev1.Pod) (restore corev1.Container) {
				for _, ctr := range p.Spec.InitContainers {
					if ctr.Name == builder.RestoreContainer {
						restore = ctr
					}
				}
				return restore
			}
			dir := t.TempDir()
			for _, tc := range []struct {
				name string
				args []string
				main func([]string) int
			}{
				{"run", builder.BackupRunnerPod(b, c, "operator", 1, []string{"http://127.0.0.1:1"}, 0).Spec.Containers[0].Args, backupMain},
				{"delete", builder.DeleteBackupPod(b, "operator").Spec.Containers[0].Args, backupMain},
				{"restore", restoreContainer(seed).Args, restoreMain},
				{"recover", restoreContainer(recoverySeed).Args, restoreMain},
			} {
				log := filepath.Join(dir, tc.name+".log")
				// Overrides only (the last value of a flag wins): what the
				// Pod's mounts give it is a temporary directory here.
				args := append(slices.Clone(tc.args[1:]), "--termination-log="+log)
				if dest.Volume != nil {
					args = append(args, "--volume-root="+dir)
				}
				switch {
				case tc.name == "restore" || tc.name == "recover":
					args = append(args, "--data-dir="+filepath.Join(dir, tc.name))
				case tc.name == "run" && dest.S3 != nil:
					args = append(args, "--scratch-dir="+dir)
				}
				if code := tc.main(args); code == 2 {
					t.Fatalf("%s: usage error for %v", tc.name, args)
				}
				data, err := os.ReadFile(log)
				if err != nil {
					t.Fatalf("%s: no result: %v", tc.name, err)
				}
				if _, err := backup.ParseResult(string(data)); err != nil {
					t.Errorf("%s: %v: %s", tc.name, err, data)
				}
			}
		})
	}
}
