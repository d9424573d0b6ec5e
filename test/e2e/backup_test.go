package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// backupBucket is the bucket of the local S3 server the backup tests use;
// keys carry the test's namespace, so tests never meet.
const backupBucket = "e2e-backups"

// writeKeys writes n keys with values of varied sizes (a few near etcd's
// 1.5 MiB request limit), overwrites some and deletes others so revisions
// differ from key to key, and returns what the keys hold and the
// cluster's revision once every write is done.
func writeKeys(ctx context.Context, t *testing.T, cli *clientv3.Client, n int) (map[string]string, int64) {
	t.Helper()
	want := map[string]string{}
	var rev int64
	var mu sync.Mutex
	// Each phase writes distinct keys, 16 at a time: members commit
	// concurrent writes together (one sync for many), and 11,000 writes
	// one after the other took minutes.
	phase := func(keys []int, op func(k string, i int) (int64, error)) {
		t.Helper()
		work := make(chan int)
		errs := make(chan error, len(keys))
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := range work {
					r, err := op(fmt.Sprintf("/data/%05d", i), i)
					if err != nil {
						errs <- err
						continue
					}
					mu.Lock()
					rev = max(rev, r)
					mu.Unlock()
				}
			})
		}
		for _, i := range keys {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	put := func(value func(i int) string) func(k string, i int) (int64, error) {
		return func(k string, i int) (int64, error) {
			v := value(i)
			resp, err := cli.Put(ctx, k, v)
			if err != nil {
				return 0, fmt.Errorf("put %s: %w", k, err)
			}
			mu.Lock()
			want[k] = v
			mu.Unlock()
			return resp.Header.Revision, nil
		}
	}
	every := func(from, step int) []int {
		var keys []int
		for i := from; i < n; i += step {
			keys = append(keys, i)
		}
		return keys
	}
	phase(every(0, 1), put(func(i int) string {
		size := 1 + (i*37)%2000
		if i%2500 == 0 {
			size = 1400 << 10
		}
		return strings.Repeat(string(rune('a'+i%26)), size)
	}))
	phase(every(0, 10), put(func(i int) string { return fmt.Sprintf("overwritten-%d", i) }))
	phase(every(5, 50), func(k string, _ int) (int64, error) {
		resp, err := cli.Delete(ctx, k)
		if err != nil {
			return 0, fmt.Errorf("delete %s: %w", k, err)
		}
		mu.Lock()
		delete(want, k)
		mu.Unlock()
		return resp.Header.Revision, nil
	})
	return want, rev
}

// assertSnapshotHolds checks the snapshot file at path: etcd's own hash,
// the revision, and every key of want with its value.
func assertSnapshotHolds(t *testing.T, path string, want map[string]string, rev int64) {
	t.Helper()
	facts, err := backup.CheckFile(path)
	if err != nil {
		t.Fatalf("the stored snapshot does not check: %v", err)
	}
	if facts.Revision != rev {
		t.Errorf("the stored snapshot is at revision %d, want %d", facts.Revision, rev)
	}
	got, err := support.SnapshotKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	missing, wrong := 0, 0
	for k, v := range want {
		switch g, ok := got[k]; {
		case !ok:
			missing++
		case g != v:
			wrong++
		}
	}
	extra := 0
	for k := range got {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, "/data/") {
			extra++
		}
	}
	if missing+wrong+extra > 0 {
		t.Errorf("the snapshot holds %d keys under /data/: %d of the %d written missing, %d with another value, %d deleted ones back", len(got), missing, len(want), wrong, extra)
	}
}

// awaitBackup waits until the backup ends and returns it.
func awaitBackup(ctx context.Context, t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{}
	support.Eventually(t, timeout, "backup "+key.Name+" to end", func() error {
		if err := k8sClient.Get(ctx, key, b); err != nil {
			return err
		}
		if b.Status.Phase != etcdv1alpha1.BackupSucceeded && b.Status.Phase != etcdv1alpha1.BackupFailed {
			return fmt.Errorf("phase %s, conditions %v", b.Status.Phase, b.Status.Conditions)
		}
		return nil
	})
	return b
}

func backupCondition(b *etcdv1alpha1.EtcdBackup) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionBackupSucceeded); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// s3Destination is the local S3 server as a destination, with the Secrets
// it names created in ns.
func s3Destination(ctx context.Context, t *testing.T, s3 *support.S3, ns string) etcdv1alpha1.BackupDestination {
	t.Helper()
	if err := s3.CreateCredentialsSecret(ctx, ns, "s3-credentials"); err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateCASecret(ctx, ns, "s3-ca"); err != nil {
		t.Fatal(err)
	}
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
		Endpoint: s3.InClusterEndpoint, Bucket: backupBucket, Prefix: "etcd",
		CredentialsSecret: etcdv1alpha1.LocalObjectReference{Name: "s3-credentials"},
		CASecret:          &etcdv1alpha1.SecretKeySelector{Name: "s3-ca"},
	}}
}

// TestBackupRestoreS3 backs up a 3-member cluster with operator-managed
// TLS and authentication on: the snapshot comes from a follower, its
// status matches the object in the bucket byte for byte, and the object
// holds every key written before the backup, with its value, at the
// revision of the last write. Then the cluster is deleted and a new one
// restored from the backup: every key, value and the revision are back,
// and it takes writes.
func TestBackupRestoreS3(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	s3, err := env.EnsureS3(ctx, backupBucket)
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Security: &etcdv1alpha1.SecuritySpec{
			EnableAuth: true,
			TLS:        &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}},
		}},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	awaitReady(ctx, t, key, 3)
	awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionTrue)
	cert, roots := secretPair(ctx, t, ns, builder.ClientTLSSecretName(c))
	cli := tlsClient(ctx, t, ns, c.Name, roots, cert)
	want, rev := writeKeys(ctx, t, cli, 10000)

	dest := s3Destination(ctx, t, s3, ns)
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: *dest.DeepCopy()},
	}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b = awaitBackup(ctx, t, client.ObjectKeyFromObject(b), 3*time.Minute)
	if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
		t.Fatalf("backup %s: %+v", b.Status.Phase, b.Status.Conditions)
	}
	t.Logf("backup of revision %d (%d bytes) from %s succeeded in %s, attempt %d", b.Status.Revision, b.Status.Size, b.Status.Member, time.Since(start).Round(time.Second), b.Status.Attempts)
	if b.Status.Revision != rev {
		t.Errorf("status.revision %d, want %d (the last write's)", b.Status.Revision, rev)
	}
	wantKey := "etcd/" + ns + "/db/first.db"
	if b.Status.Key != wantKey || b.Status.Location != "s3://"+backupBucket+"/"+wantKey {
		t.Errorf("key %q, location %q", b.Status.Key, b.Status.Location)
	}
	leader := etcdLeaderName(ctx, t, cli)
	if b.Status.Member == leader || b.Status.Member == "" {
		t.Errorf("the snapshot came from %q; the leader is %s", b.Status.Member, leader)
	}

	// The object, read by the test itself.
	mc, err := s3.Client(s3.AccessKeyID, s3.SecretAccessKey)
	if err != nil {
		t.Fatal(err)
	}
	info, err := mc.StatObject(ctx, backupBucket, wantKey, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.UserMetadata["Etcd-Sha256"]; got != b.Status.SHA256 {
		t.Errorf("object metadata sha256 %q, status %q (metadata %v)", got, b.Status.SHA256, info.UserMetadata)
	}
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := mc.FGetObject(ctx, backupBucket, wantKey, path, minio.GetObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != b.Status.SHA256 || int64(len(data)) != b.Status.Size {
		t.Errorf("object: %d bytes, sha256 %x; status: %d bytes, %s", len(data), sum, b.Status.Size, b.Status.SHA256)
	}
	assertSnapshotHolds(t, path, want, rev)
	assertNoRunners(ctx, t, ns, b.Name)

	// A second backup of the same name in another prefix is another
	// object; deleting an EtcdBackup with deletionPolicy Delete removes
	// its object, and never another backup's.
	second := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: *dest.DeepCopy(), DeletionPolicy: etcdv1alpha1.BackupDelete},
	}
	if err := k8sClient.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := awaitBackup(ctx, t, client.ObjectKeyFromObject(second), 3*time.Minute); got.Status.Phase != etcdv1alpha1.BackupSucceeded {
		t.Fatalf("second backup %s: %+v", got.Status.Phase, got.Status.Conditions)
	}
	if err := k8sClient.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, 2*time.Minute, "the second backup and its object to go", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(second), &etcdv1alpha1.EtcdBackup{}); err == nil {
			return fmt.Errorf("the EtcdBackup is still there")
		}
		if _, err := mc.StatObject(ctx, backupBucket, "etcd/"+ns+"/db/second.db", minio.StatObjectOptions{}); err == nil {
			return fmt.Errorf("its object is still there")
		}
		return nil
	})
	if _, err := mc.StatObject(ctx, backupBucket, wantKey, minio.StatObjectOptions{}); err != nil {
		t.Errorf("the first backup's object (deletionPolicy Retain) went with the second: %v", err)
	}

	// The cluster goes; a new one comes back from the backup.
	if err := k8sClient.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	restored := restoreCluster(ctx, t, c, "restored", b.Name)
	rcert, rroots := secretPair(ctx, t, ns, builder.ClientTLSSecretName(restored))
	assertRestored(ctx, t, restored, tlsClient(ctx, t, ns, restored.Name, rroots, rcert), want, rev)
}

// restoreCluster creates cluster name with like's spec, restored from
// backup, and waits until it is Ready with like's replicas.
func restoreCluster(ctx context.Context, t *testing.T, like *etcdv1alpha1.EtcdCluster, name, backupName string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: like.Namespace, Name: name}, Spec: *like.Spec.DeepCopy()}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSource{BackupName: backupName}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	took := awaitReady(ctx, t, key, *like.Spec.Replicas)
	t.Logf("cluster %s restored from %s and Ready with %d members in %s", name, backupName, *like.Spec.Replicas, took.Round(time.Second))
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionRestored, metav1.ConditionTrue, "restored from EtcdBackup "+backupName)
	return c
}

// assertRestored compares the restored cluster with what was written
// before the backup, key by key, then writes to it.
func assertRestored(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, cli *clientv3.Client, want map[string]string, rev int64) {
	t.Helper()
	got, err := cli.Get(ctx, "/data/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	missing, wrong := 0, 0
	seen := map[string]bool{}
	for _, kv := range got.Kvs {
		seen[string(kv.Key)] = true
		if v, ok := want[string(kv.Key)]; !ok || v != string(kv.Value) {
			wrong++
		}
	}
	for k := range want {
		if !seen[k] {
			missing++
		}
	}
	if missing+wrong > 0 || len(got.Kvs) != len(want) {
		t.Errorf("restored cluster %s: %d keys, %d of the %d written missing, %d wrong or unexpected", c.Name, len(got.Kvs), missing, len(want), wrong)
	}
	if got.Header.Revision != rev {
		t.Errorf("restored cluster %s is at revision %d, want %d", c.Name, got.Header.Revision, rev)
	}
	assertMembers(ctx, t, cli, c.Namespace, int(*c.Spec.Replicas))
	if _, err := cli.Put(ctx, "/after-restore", "ok"); err != nil {
		t.Errorf("restored cluster %s refuses writes: %v", c.Name, err)
	}
}

// TestBackupRestoreVolume backs up an emptyDir cluster without TLS onto a
// claim, without authentication and with root's password: the file and
// its metadata file are on the claim, and the file holds every key. A new
// cluster restored from it has them all; with a password, root of the new
// cluster has the new cluster's password, and the old one is refused.
func TestBackupRestoreVolume(t *testing.T) {
	t.Parallel()
	for _, auth := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "password"}[auth]
		t.Run(name, func(t *testing.T) {
			support.Parallel(t, support.Short)
			backupRestoreVolume(t, auth)
		})
	}
}

func backupRestoreVolume(t *testing.T, auth bool) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)}}
	if auth {
		c.Spec.Security = &etcdv1alpha1.SecuritySpec{EnableAuth: true}
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	claim := createBackupClaim(ctx, t, ns)
	key := client.ObjectKeyFromObject(c)
	awaitReady(ctx, t, key, 3)
	clientOf := func(name string) *clientv3.Client { return etcdClient(ctx, t, ns, name) }
	if auth {
		awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionAuthentication, metav1.ConditionTrue)
		clientOf = func(name string) *clientv3.Client { return rootPasswordClient(ctx, t, ns, name) }
	}
	want, rev := writeKeys(ctx, t, clientOf(c.Name), 2000)

	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "onclaim"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: etcdv1alpha1.BackupDestination{
			Volume: &etcdv1alpha1.VolumeDestination{ClaimName: "backups", Path: "etcd"},
		}},
	}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = awaitBackup(ctx, t, client.ObjectKeyFromObject(b), 3*time.Minute)
	if b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.Revision != rev {
		t.Fatalf("backup %s at revision %d (want %d): %+v", b.Status.Phase, b.Status.Revision, rev, b.Status.Conditions)
	}
	root, err := support.ClaimPath(ctx, k8sClient, ns, claim.Name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "etcd", ns, "db", "onclaim.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != b.Status.SHA256 {
		t.Errorf("file sha256 %x, status %s", sum, b.Status.SHA256)
	}
	if metaFile, err := os.ReadFile(strings.TrimSuffix(path, ".db") + ".json"); err != nil || !bytes.Contains(metaFile, []byte(b.Status.SHA256)) {
		t.Errorf("metadata file: %s, %v", metaFile, err)
	}
	assertSnapshotHolds(t, path, want, rev)
	assertNoRunners(ctx, t, ns, b.Name)

	oldPassword := &corev1.Secret{}
	if auth {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: builder.RootPasswordSecretName(c)}, oldPassword); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8sClient.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	restored := restoreCluster(ctx, t, c, "restored", b.Name)
	assertRestored(ctx, t, restored, clientOf(restored.Name), want, rev)
	if auth {
		if _, err := passwordClient(ctx, t, ns, restored.Name, "root", string(oldPassword.Data["password"])); err == nil {
			t.Error("root of the restored cluster still takes the backed-up cluster's password")
		}
	}
}

// TestRestoreRefusesACorruptSnapshot flips one byte of a stored snapshot
// in the bucket's own files: the restore refuses it with a condition that
// says so, and etcd never starts from it. A restore from a backup that
// does not exist creates no Pod.
func TestRestoreRefusesACorruptSnapshot(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	s3, err := env.EnsureS3(ctx, backupBucket)
	if err != nil {
		t.Fatal(err)
	}
	c := createPlainCluster(ctx, t, ns, 1)
	awaitReady(ctx, t, client.ObjectKeyFromObject(c), 1)
	writeKeys(ctx, t, etcdClient(ctx, t, ns, c.Name), 200)
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tampered"},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: s3Destination(ctx, t, s3, ns)},
	}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b = awaitBackup(ctx, t, client.ObjectKeyFromObject(b), 3*time.Minute); b.Status.Phase != etcdv1alpha1.BackupSucceeded {
		t.Fatalf("backup %s: %+v", b.Status.Phase, b.Status.Conditions)
	}
	flipStoredByte(ctx, t, backupBucket, b.Status.Key)

	bad := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fromtampered"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
		Bootstrap: &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSource{BackupName: b.Name}}}}
	if err := k8sClient.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(bad)
	awaitCondition(ctx, t, key, 2*time.Minute, etcdv1alpha1.ConditionRestored, metav1.ConditionFalse, "is damaged", "it is corrupted")
	got := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionRestored); cond.Reason != backup.ReasonChecksumMismatch {
		t.Errorf("Restored reason %s, want %s", cond.Reason, backup.ReasonChecksumMismatch)
	}
	if got.Status.ClusterID != "" {
		t.Errorf("a cluster formed from a tampered snapshot: %s", got.Status.ClusterID)
	}
	pods := memberPods(ctx, t, key)
	if len(pods) != 1 {
		t.Errorf("%d member Pods; want the seed alone", len(pods))
	}
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "etcd" && (s.State.Running != nil || s.State.Terminated != nil || s.RestartCount > 0) {
				t.Errorf("etcd started in %s from a tampered snapshot: %+v", p.Name, s.State)
			}
		}
	}

	// A backup that does not exist: no Pod, a condition naming the field.
	missing := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fromnothing"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1),
		Bootstrap: &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSource{BackupName: "nothing"}}}}
	if err := k8sClient.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, client.ObjectKeyFromObject(missing), time.Minute, etcdv1alpha1.ConditionRestored, metav1.ConditionFalse, "spec.bootstrap.restore.backupName: EtcdBackup nothing not found")
	if pods := memberPods(ctx, t, client.ObjectKeyFromObject(missing)); len(pods) != 0 {
		t.Errorf("%d member Pods for a restore from nothing", len(pods))
	}
}

// flipStoredByte flips one byte in the middle of the object key of bucket
// in the S3 server's own files (its POSIX backend keeps each object as a
// file on its claim), behind the S3 API: the object's metadata, its
// recorded SHA-256 included, stays.
func flipStoredByte(ctx context.Context, t *testing.T, bucket, key string) {
	t.Helper()
	root, err := support.ClaimPath(ctx, k8sClient, support.S3Namespace, "s3-data")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, bucket, filepath.FromSlash(key))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// TestBackupBadInput: what a careless user gets wrong ends in a condition
// that names the field, and a backup waiting for its Secret starts once
// the Secret is there.
func TestBackupBadInput(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	s3, err := env.EnsureS3(ctx, backupBucket)
	if err != nil {
		t.Fatal(err)
	}
	c := createPlainCluster(ctx, t, ns, 1)
	awaitReady(ctx, t, client.ObjectKeyFromObject(c), 1)
	good := s3Destination(ctx, t, s3, ns)
	if err := support.CreateS3CredentialsSecret(ctx, env.Client, ns, "wrong-keys", s3.AccessKeyID, "not-the-secret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, reason, says string
		change             func(*etcdv1alpha1.S3Destination)
	}{
		{"no-bucket", backup.ReasonBucketNotFound, "spec.destination.s3.bucket: bucket nowhere does not exist", func(d *etcdv1alpha1.S3Destination) { d.Bucket = "nowhere" }},
		{"wrong-keys", backup.ReasonAccessDenied, "spec.destination.s3.credentialsSecret", func(d *etcdv1alpha1.S3Destination) { d.CredentialsSecret.Name = "wrong-keys" }},
		{"untrusted", backup.ReasonEndpointFailed, "spec.destination.s3.caSecret", func(d *etcdv1alpha1.S3Destination) { d.CASecret = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := *good.S3
			tc.change(&d)
			b := &etcdv1alpha1.EtcdBackup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, BackoffLimit: ptr.To[int32](0), Destination: etcdv1alpha1.BackupDestination{S3: &d}},
			}
			if err := k8sClient.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			b = awaitBackup(ctx, t, client.ObjectKeyFromObject(b), 2*time.Minute)
			if cond := backupCondition(b); b.Status.Phase != etcdv1alpha1.BackupFailed || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.says) {
				t.Errorf("phase %s, condition %s: %s; want Failed, %s saying %q", b.Status.Phase, cond.Reason, cond.Message, tc.reason, tc.says)
			}
		})
	}

	// A Secret that is not there yet: Pending without using an attempt,
	// then a success once it is created.
	late := *good.S3
	late.CredentialsSecret.Name = "late"
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: etcdv1alpha1.BackupDestination{S3: &late}},
	}
	if err := k8sClient.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, time.Minute, "the backup to wait for its Secret", func() error {
		got := &etcdv1alpha1.EtcdBackup{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			return err
		}
		if cond := backupCondition(got); got.Status.Phase != etcdv1alpha1.BackupPending || !strings.HasPrefix(cond.Message, "spec.destination.s3.credentialsSecret.name: Secret late not found") || got.Status.Attempts != 0 {
			return fmt.Errorf("phase %s, attempts %d, condition %s: %s", got.Status.Phase, got.Status.Attempts, cond.Reason, cond.Message)
		}
		return nil
	})
	if err := s3.CreateCredentialsSecret(ctx, ns, "late"); err != nil {
		t.Fatal(err)
	}
	if got := awaitBackup(ctx, t, client.ObjectKeyFromObject(b), 2*time.Minute); got.Status.Phase != etcdv1alpha1.BackupSucceeded {
		cond := backupCondition(got)
		t.Errorf("once its Secret exists the backup is %s: %s: %s", got.Status.Phase, cond.Reason, cond.Message)
	}
}

// createPlainCluster creates the EtcdCluster db of replicas members in ns,
// without TLS or authentication, and does not wait.
func createPlainCluster(ctx context.Context, t *testing.T, ns string, replicas int32) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas)}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// createBackupClaim creates the 1Gi claim backups in ns.
func createBackupClaim(ctx context.Context, t *testing.T, ns string) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8sClient.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

// etcdLeaderName is the name of the member that leads.
func etcdLeaderName(ctx context.Context, t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members.Members {
		if m.ID == st.Leader {
			return m.Name
		}
	}
	t.Fatalf("no member is the leader %x", st.Leader)
	return ""
}

// assertNoRunners checks that a backup's runner Pods are gone once its
// result is in the status.
func assertNoRunners(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	support.Eventually(t, time.Minute, "the runner Pods of "+name+" to go", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{builder.LabelBackup: name}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d left", len(pods.Items))
		}
		return nil
	})
}

// TestBackupScheduleKeep3 runs a schedule every minute with keepLast 3:
// once five backups have been taken, exactly three remain, with exactly
// their three objects in the bucket, each matching its backup's SHA-256.
func TestBackupScheduleKeep3(t *testing.T) {
	support.Parallel(t, support.Long)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	s3, err := env.EnsureS3(ctx, backupBucket)
	if err != nil {
		t.Fatal(err)
	}
	c := createPlainCluster(ctx, t, ns, 1)
	awaitReady(ctx, t, client.ObjectKeyFromObject(c), 1)
	writeKeys(ctx, t, etcdClient(ctx, t, ns, c.Name), 100)
	s := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minutely"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: c.Name, Schedule: "* * * * *", Destination: s3Destination(ctx, t, s3, ns),
			Retention: etcdv1alpha1.BackupRetention{KeepLast: ptr.To[int32](3)}},
	}
	if err := k8sClient.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	mc, err := s3.Client(s3.AccessKeyID, s3.SecretAccessKey)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "etcd/" + ns + "/db/"
	seen := map[string]bool{}
	support.Eventually(t, 9*time.Minute, "five scheduled backups, three kept with their objects", func() error {
		list := &etcdv1alpha1.EtcdBackupList{}
		if err := k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelBackupSchedule: s.Name}); err != nil {
			return err
		}
		kept := map[string]string{} // object key -> SHA-256 of the backups kept
		for _, b := range list.Items {
			seen[b.Name] = true
			if b.DeletionTimestamp.IsZero() && b.Status.Phase == etcdv1alpha1.BackupSucceeded {
				kept[b.Status.Key] = b.Status.SHA256
			}
		}
		if len(seen) < 5 {
			return fmt.Errorf("%d backups taken so far", len(seen))
		}
		if len(list.Items) != 3 || len(kept) != 3 {
			return fmt.Errorf("%d backups exist, %d of them Succeeded and not being deleted; want 3", len(list.Items), len(kept))
		}
		var objects []string
		for o := range mc.ListObjects(ctx, backupBucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return o.Err
			}
			objects = append(objects, o.Key)
		}
		if len(objects) != 3 {
			return fmt.Errorf("%d objects under %s: %v", len(objects), prefix, objects)
		}
		for _, key := range objects {
			want, ok := kept[key]
			if !ok {
				return fmt.Errorf("object %s belongs to no backup kept", key)
			}
			obj, err := mc.GetObject(ctx, backupBucket, key, minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, obj)
			_ = obj.Close()
			if err != nil {
				return err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				return fmt.Errorf("object %s has SHA-256 %s, its backup says %s", key, got, want)
			}
		}
		return nil
	})
	got := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastSuccessfulTime == nil || got.Status.NextScheduleTime == nil || !meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.ConditionScheduleReady) {
		t.Errorf("schedule status %+v", got.Status)
	}
	t.Logf("%d backups taken, 3 kept", len(seen))
}

// TestBackupDuringRollAndReplacement takes a backup while the cluster
// rolls to a new spec, and another while a member whose data was wiped is
// replaced, with a writer running: both succeed, and each snapshot holds
// every write acknowledged before the backup was asked for.
func TestBackupDuringRollAndReplacement(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	c := createPlainCluster(ctx, t, ns, 3)
	claim := createBackupClaim(ctx, t, ns)
	key := client.ObjectKeyFromObject(c)
	awaitReady(ctx, t, key, 3)
	w, stopWriter := support.LaunchWriter(ctx, etcdClient(ctx, t, ns, c.Name))
	defer stopWriter()
	time.Sleep(3 * time.Second)

	// ask creates a backup now and returns the writes acknowledged before.
	ask := func(name string) []string {
		t.Helper()
		acked := w.AckedKeys()
		b := &etcdv1alpha1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: etcdv1alpha1.BackupDestination{
				Volume: &etcdv1alpha1.VolumeDestination{ClaimName: claim.Name},
			}},
		}
		if err := k8sClient.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		return acked
	}

	// A merge patch, not an update: the operator writes the cluster's
	// status meanwhile, which moves the object's resourceVersion too, and
	// an update from the copy read before is refused with a conflict.
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Options = map[string]string{"snapshot-count": "20000"}
	if err := k8sClient.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	wanted := map[string][]string{"during-roll": ask("during-roll")}
	awaitRolled(ctx, t, key, 3)

	harm(ctx, t, pickVictim(ctx, t, ns, c.Name, false), wipeData)
	wanted["during-replacement"] = ask("during-replacement")
	awaitReady(ctx, t, key, 3)

	root, err := support.ClaimPath(ctx, k8sClient, ns, claim.Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, acked := range wanted {
		b := awaitBackup(ctx, t, client.ObjectKey{Namespace: ns, Name: name}, 4*time.Minute)
		if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
			t.Errorf("backup %s: %s: %+v", name, b.Status.Phase, backupCondition(b))
			continue
		}
		keys, err := support.SnapshotKeys(filepath.Join(root, filepath.FromSlash(b.Status.Key)))
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, k := range acked {
			if _, ok := keys[k]; !ok {
				missing++
			}
		}
		t.Logf("backup %s: revision %d from %s, attempt %d; %d writes acknowledged before it, %d missing", name, b.Status.Revision, b.Status.Member, b.Status.Attempts, len(acked), missing)
		if missing > 0 || len(acked) == 0 {
			t.Errorf("backup %s lacks %d of the %d writes acknowledged before it was asked for", name, missing, len(acked))
		}
	}
}
