package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/authpb"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"
)

// Reasons of a restore's result.
const (
	ReasonRestored         = "Restored"
	ReasonChecksumMismatch = "ChecksumMismatch"
	ReasonRevisionMismatch = "RevisionMismatch"
	ReasonRestoreFailed    = "RestoreFailed"
)

// RestoreParams is the restore of a snapshot into a new cluster's seed
// member.
type RestoreParams struct {
	// DataDir is the member's data directory; the restored member/
	// appears in it last, whole, by a rename.
	DataDir string
	// Name, PeerURL and Token are the seed member's --name,
	// --initial-advertise-peer-urls and the new cluster's
	// --initial-cluster-token: the restored data gets new cluster and
	// member IDs from them.
	Name, PeerURL, Token string
	// From and Key are where the snapshot is; Size, SHA256 and Revision
	// what it must be (the backup's status). A snapshot streamed from a
	// survivor has none known beforehand: zero values are not checked.
	From     Source
	Key      string
	Size     int64
	SHA256   string
	Revision int64
	// Etcdutl is the etcdutl of the member's own image, so the data is
	// written by the release that will read it.
	Etcdutl string
	// AuthEnabled is whether the new cluster checks who is calling;
	// RootPassword, when set, becomes root's password (a cluster without
	// a client certificate for the operator). Authentication is set up
	// offline, so restored data is never served with the old cluster's
	// credentials or without the new cluster's.
	AuthEnabled  bool
	RootPassword string
}

// Restore restores a snapshot into p.DataDir: fetched while hashed, its
// size, SHA-256, etcd's own trailing hash and revision checked, restored
// by etcdutl under the new identity, authentication set as the new
// cluster's spec says, and only then moved into place. A data directory
// that holds member/ already is left alone: the restore ran, or etcd did.
func Restore(ctx context.Context, p RestoreParams) Result {
	facts, err := restore(ctx, p)
	r := resultOf(p.Key, facts, source{}, err)
	if err == nil {
		r.Reason = ReasonRestored
	}
	return r
}

func restore(ctx context.Context, p RestoreParams) (Facts, error) {
	member := filepath.Join(p.DataDir, "member")
	if _, err := os.Stat(member); err == nil {
		return Facts{Size: p.Size, SHA256: p.SHA256, Revision: p.Revision}, nil
	}
	work := filepath.Join(p.DataDir, ".restore")
	if err := os.RemoveAll(work); err != nil {
		return Facts{}, err
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return Facts{}, err
	}
	snapshot := filepath.Join(work, "snapshot.db")
	facts, err := writeChecked(snapshot, func(w io.Writer) error { return p.From.Fetch(ctx, p.Key, w) })
	if err != nil {
		var f *Failure
		if errors.As(err, &f) && f.Reason == ReasonVerificationFailed {
			return Facts{}, failf(ReasonChecksumMismatch, "the snapshot from %s is damaged: %s", p.From.Location(p.Key), f.Message)
		}
		return Facts{}, err
	}
	if problem := compareExpected(facts, p); problem != "" {
		return Facts{}, failf(ReasonChecksumMismatch, "the snapshot at %s is not the one the backup took: %s", p.From.Location(p.Key), problem)
	}
	if p.Revision != 0 && facts.Revision != p.Revision {
		return Facts{}, failf(ReasonRevisionMismatch, "the snapshot at %s holds revision %d, the backup says %d", p.From.Location(p.Key), facts.Revision, p.Revision)
	}
	data := filepath.Join(work, "data")
	cmd := exec.CommandContext(ctx, p.Etcdutl, "snapshot", "restore", snapshot,
		"--data-dir="+data, "--name="+p.Name, "--initial-cluster="+p.Name+"="+p.PeerURL,
		"--initial-cluster-token="+p.Token, "--initial-advertise-peer-urls="+p.PeerURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Facts{}, failf(ReasonRestoreFailed, "etcdutl snapshot restore: %v: %s", err, LastLines(string(out), 5))
	}
	if err := setAuth(filepath.Join(data, "member", "snap", "db"), p.AuthEnabled, p.RootPassword); err != nil {
		return Facts{}, failf(ReasonRestoreFailed, "setting up authentication in the restored data: %v", err)
	}
	if err := syncTree(data); err != nil {
		return Facts{}, err
	}
	if err := os.Rename(filepath.Join(data, "member"), member); err != nil {
		return Facts{}, err
	}
	if err := syncDir(p.DataDir); err != nil {
		return Facts{}, err
	}
	return facts, os.RemoveAll(work)
}

// compareExpected says how facts differ from the size and SHA-256 the
// backup recorded; "" when they do not, or when none was recorded.
func compareExpected(facts Facts, p RestoreParams) string {
	switch {
	case p.SHA256 == "":
		return ""
	case facts.Size != p.Size:
		return fmt.Sprintf("%d bytes, want %d", facts.Size, p.Size)
	case facts.SHA256 != p.SHA256:
		return fmt.Sprintf("SHA-256 %s, want %s", facts.SHA256, p.SHA256)
	}
	return ""
}

// Keys of etcd's authentication state in its database (etcd's
// server/storage/schema, the same in 3.5 and 3.6).
var (
	authBucket      = []byte("auth")
	authEnabledKey  = []byte("authEnabled")
	authUsersBucket = []byte("authUsers")
	rootUser        = []byte("root")
)

// setAuth makes the restored database's authentication what the new
// cluster wants: off when it wants none; on, with root's password set to
// rootPassword when there is one. A snapshot taken with authentication
// off stays off: the operator turns it on once the cluster runs, with the
// root user it creates then.
func setAuth(db string, enabled bool, rootPassword string) error {
	b, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		return err
	}
	err = b.Update(func(tx *bolt.Tx) error {
		auth := tx.Bucket(authBucket)
		if auth == nil {
			return nil // no authentication state at all: nothing to change
		}
		if !enabled {
			return auth.Put(authEnabledKey, []byte{0})
		}
		on := auth.Get(authEnabledKey)
		if len(on) != 1 || on[0] != 1 || rootPassword == "" {
			return nil
		}
		users := tx.Bucket(authUsersBucket)
		if users == nil {
			return fmt.Errorf("authentication is on but the database has no users")
		}
		raw := users.Get(rootUser)
		if raw == nil {
			return fmt.Errorf("authentication is on but the database has no root user")
		}
		var root authpb.User
		if err := proto.Unmarshal(raw, &root); err != nil {
			return fmt.Errorf("reading the root user: %w", err)
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(rootPassword), bcrypt.DefaultCost)
		if err != nil {
			return err
		}
		root.Password, root.Options = hash, nil
		out, err := proto.Marshal(&root)
		if err != nil {
			return err
		}
		return users.Put(rootUser, out)
	})
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// LastLines is the last n lines of s, joined by " | ": the end of a log,
// where a program says why it stopped.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
