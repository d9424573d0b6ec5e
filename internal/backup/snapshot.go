// Package backup takes, checks, stores and reads back etcd snapshots. Its
// Run is what an EtcdBackup's runner Pod executes (`manager backup run`):
// the operator process never streams a snapshot or holds store
// credentials; it creates the Pod and reads its termination message.
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Facts are what a checked snapshot file holds.
type Facts struct {
	// Size is the file's size in bytes, etcd's trailing hash included.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the whole file.
	SHA256 string `json:"sha256"`
	// Revision is the highest revision in the snapshot.
	Revision int64 `json:"revision"`
}

// hashingWriter hashes everything written to it, and separately everything
// but the last sha256.Size bytes: an etcd snapshot is a database followed
// by the SHA-256 of that database, and both hashes are known once the last
// byte is written, without reading the file again.
type hashingWriter struct {
	all, body hash.Hash
	tail      []byte // the last bytes seen, at most sha256.Size
	size      int64
}

func newHashingWriter() *hashingWriter {
	return &hashingWriter{all: sha256.New(), body: sha256.New()}
}

func (h *hashingWriter) Write(p []byte) (int, error) {
	h.all.Write(p)
	h.size += int64(len(p))
	joined := append(h.tail[:len(h.tail):len(h.tail)], p...)
	if cut := len(joined) - sha256.Size; cut > 0 {
		h.body.Write(joined[:cut])
		joined = joined[cut:]
	}
	h.tail = joined
	return len(p), nil
}

// check says whether what was written is an intact etcd snapshot: its
// size is that of a database (a multiple of 512 bytes) plus the trailing
// hash, and the trailing hash is the SHA-256 of the rest. These are the
// checks etcdutl snapshot restore makes.
func (h *hashingWriter) check() error {
	if h.size%512 != sha256.Size {
		return fmt.Errorf("the snapshot is %d bytes, not a database followed by etcd's SHA-256 (size %% 512 = %d, want %d): it is truncated or not an etcd snapshot", h.size, h.size%512, sha256.Size)
	}
	if want := h.body.Sum(nil); !bytes.Equal(h.tail, want) {
		return fmt.Errorf("the snapshot's trailing SHA-256 %x is not that of its contents (%x): it is corrupted", h.tail, want)
	}
	return nil
}

func (h *hashingWriter) sum() string { return hex.EncodeToString(h.all.Sum(nil)) }

// writeChecked copies r into the file at path (created, or truncated),
// syncs it, and checks it is an intact snapshot: the hashes are taken on
// the way, then the database is opened read-only for its revision.
func writeChecked(path string, fill func(io.Writer) error) (Facts, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return Facts{}, err
	}
	h := newHashingWriter()
	err = fill(io.MultiWriter(f, h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Facts{}, err
	}
	if err := h.check(); err != nil {
		return Facts{}, &Failure{Reason: ReasonVerificationFailed, Message: err.Error()}
	}
	rev, err := SnapshotRevision(path)
	if err != nil {
		return Facts{}, &Failure{Reason: ReasonVerificationFailed, Message: err.Error()}
	}
	return Facts{Size: h.size, SHA256: h.sum(), Revision: rev}, nil
}

// CheckFile checks the snapshot file at path as writeChecked does, by
// reading it: its size, etcd's trailing hash and its revision.
func CheckFile(path string) (Facts, error) {
	f, err := os.Open(path)
	if err != nil {
		return Facts{}, err
	}
	defer func() { _ = f.Close() }()
	h := newHashingWriter()
	if _, err := io.Copy(h, f); err != nil {
		return Facts{}, err
	}
	if err := h.check(); err != nil {
		return Facts{}, err
	}
	rev, err := SnapshotRevision(path)
	if err != nil {
		return Facts{}, err
	}
	return Facts{Size: h.size, SHA256: h.sum(), Revision: rev}, nil
}

// SnapshotRevision is the highest revision in the snapshot file at path,
// read from its database as etcdutl snapshot status reads it: the last
// key of the "key" bucket, whose first 8 bytes are the main revision.
func SnapshotRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("opening the snapshot's database: %w", err)
	}
	defer func() { _ = db.Close() }()
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return fmt.Errorf("the snapshot's database has no meta bucket: it is not an etcd database")
		}
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("the snapshot's database has no key bucket: it is not an etcd database")
		}
		k, _ := b.Cursor().Last()
		switch {
		case k == nil:
			rev = 1 // a new cluster's store starts at revision 1 with no keys
		case len(k) < 8:
			return fmt.Errorf("the snapshot's last revision key %x is too short", k)
		default:
			rev = int64(binary.BigEndian.Uint64(k[:8]))
		}
		// A compaction that dropped the last revisions' tombstones leaves
		// the store at its revision, as etcd reads it back at start.
		if c := meta.Get([]byte("finishedCompactRev")); len(c) >= 8 {
			rev = max(rev, int64(binary.BigEndian.Uint64(c[:8])))
		}
		return nil
	})
	return rev, err
}
