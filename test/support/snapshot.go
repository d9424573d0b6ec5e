package support

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SnapshotKeys reads the live keys of the etcd snapshot file at path
// straight from its database: the latest version of each key, deleted
// keys dropped, as a member restored from it would serve them.
func SnapshotKeys(path string) (map[string]string, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	keys := map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%s has no key bucket: not an etcd snapshot", path)
		}
		// Keys are revisions in order; a revision key ending in 't' is a
		// deletion.
		return b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return err
			}
			if len(k) > 17 && k[17] == 't' {
				delete(keys, string(kv.Key))
				return nil
			}
			keys[string(kv.Key)] = string(kv.Value)
			return nil
		})
	})
	return keys, err
}

// ClaimPath is where the local cluster keeps the files of claim ns/name
// on this host: the local path of its volume.
func ClaimPath(ctx context.Context, c client.Client, ns, name string) (string, error) {
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); err != nil {
		return "", err
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		return "", err
	}
	if pv.Spec.Local == nil {
		return "", fmt.Errorf("volume %s of claim %s/%s has no local path", pv.Name, ns, name)
	}
	return filepath.Clean(pv.Spec.Local.Path), nil
}
