package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// snapshotBytes is an etcd snapshot as a member streams it: a bbolt
// database whose "key" bucket ends at revision rev, followed by its
// SHA-256.
func snapshotBytes(t *testing.T, rev int64) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("consistent_index"), make([]byte, 8)); err != nil {
			return err
		}
		keys, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		for r := int64(2); r <= rev; r++ {
			k := make([]byte, 17)
			binary.BigEndian.PutUint64(k, uint64(r))
			k[8] = '_'
			if err := keys.Put(k, []byte("value")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return append(data, sum[:]...)
}

func TestWriteCheckedRefusesDamagedSnapshots(t *testing.T) {
	good := snapshotBytes(t, 42)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0xff
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // in the error; "" for success
	}{
		{"intact", good, ""},
		{"a byte of the database flipped", flip(len(good) / 2), "trailing SHA-256"},
		{"a byte of the trailing hash flipped", flip(len(good) - 1), "trailing SHA-256"},
		{"truncated", good[:len(good)-1000], "truncated"},
		{"no trailing hash", good[:len(good)-sha256.Size], "truncated"},
		{"not a database", append(bytes.Repeat([]byte{1}, 4096), sha256.New().Sum(nil)...), "trailing SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			facts, err := writeChecked(path, func(w io.Writer) error {
				// Written in odd pieces, as a stream's blobs come.
				for rest := tc.data; len(rest) > 0; {
					n := min(len(rest), 1000+len(rest)%7)
					if _, err := w.Write(rest[:n]); err != nil {
						return err
					}
					rest = rest[n:]
				}
				return nil
			})
			if tc.want == "" {
				sum := sha256.Sum256(good)
				if err != nil || facts.Revision != 42 || facts.Size != int64(len(good)) || facts.SHA256 != hex.EncodeToString(sum[:]) {
					t.Fatalf("writeChecked = %+v, %v", facts, err)
				}
				if again, err := CheckFile(path); err != nil || again != facts {
					t.Errorf("CheckFile = %+v, %v; want %+v", again, err, facts)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) || f.Reason != ReasonVerificationFailed || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("writeChecked error = %v; want %s with %q", err, ReasonVerificationFailed, tc.want)
			}
		})
	}
}

func TestSnapshotSources(t *testing.T) {
	member := func(name string, learner bool) etcd.Member {
		return etcd.Member{Name: name, ClientURLs: []string{"https://" + name}, IsLearner: learner}
	}
	status := func(id, leader, applied uint64) *etcd.Status {
		return &etcd.Status{MemberID: id, Leader: leader, RaftAppliedIndex: applied}
	}
	names := func(ss []source) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name     string
		members  []etcd.Member
		statuses []*etcd.Status
		want     string
	}{
		{"followers, freshest first; never the leader", []etcd.Member{member("a", false), member("b", false), member("c", false)},
			[]*etcd.Status{status(1, 1, 90), status(2, 1, 80), status(3, 1, 85)}, "c,b"},
		{"ties by name", []etcd.Member{member("b", false), member("a", false), member("c", false)},
			[]*etcd.Status{status(2, 3, 5), status(1, 3, 5), status(3, 3, 5)}, "a,b"},
		{"the only member, which leads", []etcd.Member{member("a", false)}, []*etcd.Status{status(1, 1, 5)}, "a"},
		{"the only voter, which leads, and a learner joining", []etcd.Member{member("a", false), member("l", true)}, []*etcd.Status{status(1, 1, 5), status(2, 1, 1)}, "a"},
		{"a leader alone among silent followers is no source", []etcd.Member{member("a", false), member("b", false), member("c", false)},
			[]*etcd.Status{status(1, 1, 9), nil, nil}, ""},
		{"learners never, nor members without a leader", []etcd.Member{member("a", false), member("b", false), member("l", true)},
			[]*etcd.Status{status(1, 0, 9), status(2, 2, 9), status(3, 2, 9)}, ""},
		{"a follower that did not answer is skipped", []etcd.Member{member("a", false), member("b", false), member("c", false)},
			[]*etcd.Status{status(1, 2, 9), status(2, 2, 9), nil}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(snapshotSources(tc.members, tc.statuses)); got != tc.want {
				t.Errorf("sources %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeCluster is a fake 3-member cluster whose members stream data.
func fakeCluster(data []byte) *fake.Client {
	cli := fake.New(
		etcd.Member{ID: 1, Name: "c-0", ClientURLs: []string{"https://c-0:2379"}},
		etcd.Member{ID: 2, Name: "c-1", ClientURLs: []string{"https://c-1:2379"}},
		etcd.Member{ID: 3, Name: "c-2", ClientURLs: []string{"https://c-2:2379"}},
	).WithLeader(1)
	return cli.WithSnapshot(data)
}

func params(cli *fake.Client, store Store, uid string) Params {
	return Params{
		Namespace: "ns", Cluster: "c", BackupUID: uid, Key: "ns/c/b.db", Store: store,
		Etcd:      etcd.Config{Endpoints: []string{"https://c-0:2379"}},
		NewClient: func(etcd.Config) (etcd.Client, error) { return cli, nil },
	}
}

func TestRunStoresAVerifiedSnapshotOnce(t *testing.T) {
	ctx := context.Background()
	data := snapshotBytes(t, 7)
	root := t.TempDir()
	store := NewVolumeStore(VolumeConfig{Claim: "claim", Root: root})
	cli := fakeCluster(data)

	res := Run(ctx, params(cli, store, "uid-1"))
	if !res.Succeeded() || res.Revision != 7 || res.Size != int64(len(data)) || res.Member == "c-0" || res.ClusterID == "" || res.Location != "pvc://claim/ns/c/b.db" {
		t.Fatalf("Run = %+v", res)
	}
	stored, err := os.ReadFile(filepath.Join(root, "ns/c/b.db"))
	if err != nil || !bytes.Equal(stored, data) {
		t.Fatalf("stored snapshot differs from the member's (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ns/c/b.db.part")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging file is left: %v", err)
	}
	meta, err := os.ReadFile(filepath.Join(root, "ns/c/b.json"))
	if err != nil || !strings.Contains(string(meta), res.SHA256) || !strings.Contains(string(meta), `"uid-1"`) {
		t.Errorf("metadata file: %s, %v", meta, err)
	}

	// The same backup again (its result was lost): verified, not taken again.
	snapshots := len(cli.CallsOf(fake.Snapshot))
	if again := Run(ctx, params(cli, store, "uid-1")); again != res {
		t.Errorf("second Run = %+v, want %+v", again, res)
	}
	if n := len(cli.CallsOf(fake.Snapshot)); n != snapshots {
		t.Errorf("the second Run took another snapshot")
	}

	// Another backup with the same key never overwrites it.
	other := Run(ctx, params(cli, store, "uid-2"))
	if other.Reason != ReasonObjectExists {
		t.Errorf("another backup at the same key: %+v, want %s", other, ReasonObjectExists)
	}
	if after, _ := os.ReadFile(filepath.Join(root, "ns/c/b.db")); !bytes.Equal(after, data) {
		t.Error("the stored snapshot changed")
	}
}

func TestRunTriesTheNextMemberAndNeverStoresADamagedSnapshot(t *testing.T) {
	ctx := context.Background()
	data := snapshotBytes(t, 7)
	data[100] ^= 1
	root := t.TempDir()
	cli := fakeCluster(data)
	res := Run(ctx, params(cli, NewVolumeStore(VolumeConfig{Claim: "claim", Root: root}), "uid-1"))
	if res.Reason != ReasonSnapshotFailed || !strings.Contains(res.Message, "c-1") || !strings.Contains(res.Message, "c-2") {
		t.Fatalf("Run = %+v; want %s naming both followers", res, ReasonSnapshotFailed)
	}
	if n := len(cli.CallsOf(fake.Snapshot)); n != 2 {
		t.Errorf("%d snapshots taken, want one per follower", n)
	}
	if _, err := os.Stat(filepath.Join(root, "ns/c/b.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a damaged snapshot was stored: %v", err)
	}
}

// corruptingStore flips a byte of every snapshot it stores, as a faulty
// store or network would.
type corruptingStore struct{ Store }

func (c corruptingStore) Put(ctx context.Context, key, staging string, facts Facts, meta map[string]string) error {
	data, err := os.ReadFile(staging)
	if err != nil {
		return err
	}
	data[len(data)/3] ^= 1
	if err := os.WriteFile(staging, data, 0o600); err != nil {
		return err
	}
	return c.Store.Put(ctx, key, staging, facts, meta)
}

func TestRunNeverReportsASnapshotThatDoesNotReadBack(t *testing.T) {
	root := t.TempDir()
	store := corruptingStore{NewVolumeStore(VolumeConfig{Claim: "claim", Root: root})}
	res := Run(context.Background(), params(fakeCluster(snapshotBytes(t, 7)), store, "uid-1"))
	if res.Succeeded() || res.Reason != ReasonVerificationFailed {
		t.Fatalf("Run = %+v; want %s", res, ReasonVerificationFailed)
	}
	if _, err := os.Stat(filepath.Join(root, "ns/c/b.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot that did not read back is left: %v", err)
	}
}

// TestRunRefusesASnapshotBehindTheCluster: a follower that has not applied
// every write acknowledged before the attempt began gives no snapshot.
func TestRunRefusesASnapshotBehindTheCluster(t *testing.T) {
	root := t.TempDir()
	cli := fakeCluster(snapshotBytes(t, 7)).WithRevision(9)
	res := Run(context.Background(), params(cli, NewVolumeStore(VolumeConfig{Claim: "claim", Root: root}), "uid-1"))
	if res.Reason != ReasonSnapshotFailed || !strings.Contains(res.Message, "at revision 7, behind the cluster's 9") {
		t.Fatalf("Run = %+v; want %s: behind the cluster", res, ReasonSnapshotFailed)
	}
	if _, err := os.Stat(filepath.Join(root, "ns/c/b.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stale snapshot was stored: %v", err)
	}
}
