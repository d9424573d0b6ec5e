package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Reasons a runner reports: the Succeeded condition's reason on the
// EtcdBackup. Every message starts with the spec field to fix when there
// is one.
const (
	ReasonVerified           = "Verified"
	ReasonBucketNotFound     = "BucketNotFound"
	ReasonAccessDenied       = "AccessDenied"
	ReasonEndpointFailed     = "EndpointUnreachable"
	ReasonObjectExists       = "ObjectExists"
	ReasonNoHealthyMember    = "NoHealthyMember"
	ReasonSnapshotFailed     = "SnapshotFailed"
	ReasonVerificationFailed = "VerificationFailed"
	ReasonStoreFailed        = "StoreFailed"
	ReasonInvalidInput       = "InvalidInput"
)

// Failure is an error with the reason the EtcdBackup shows for it.
type Failure struct {
	Reason  string
	Message string
}

func (f *Failure) Error() string { return f.Message }

// failf is a Failure with a formatted message.
func failf(reason, format string, args ...any) *Failure {
	return &Failure{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Result is what a runner reports as its container's termination message:
// one JSON object, well under the 4096 bytes a termination message holds.
type Result struct {
	// Reason is ReasonVerified on success, else why the attempt failed.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Key is the object key or path the runner was asked to store at; the
	// operator takes a result only for the key it expects.
	Key string `json:"key"`
	// Location names where the snapshot is, for humans
	// (s3://<bucket>/<key>, pvc://<claim>/<key>).
	Location string `json:"location,omitempty"`
	Facts
	// Member is the name of the member the snapshot came from, ClusterID
	// its cluster (hex), Version its server version, StorageVersion the
	// version of the snapshot's storage format ("" before 3.6).
	Member         string `json:"member,omitempty"`
	ClusterID      string `json:"clusterID,omitempty"`
	Version        string `json:"version,omitempty"`
	StorageVersion string `json:"storageVersion,omitempty"`
}

// Succeeded tells whether the result is a stored, verified snapshot, or
// one removed.
func (r Result) Succeeded() bool {
	return r.Reason == ReasonVerified || r.Reason == ReasonDeleted || r.Reason == ReasonRestored
}

// resultOf is the result of an attempt that ended with err (nil: success).
func resultOf(key string, facts Facts, from source, err error) Result {
	r := Result{Key: key, Facts: facts, Member: from.name, ClusterID: from.clusterID, Version: from.version, StorageVersion: from.storageVersion, Reason: ReasonVerified}
	if err != nil {
		r.Reason, r.Message = ReasonSnapshotFailed, err.Error()
		var f *Failure
		if errors.As(err, &f) {
			r.Reason = f.Reason
		}
		if len(r.Message) > 2048 {
			r.Message = r.Message[:2048] + "..."
		}
	}
	return r
}

// ParseResult reads a runner's termination message.
func ParseResult(message string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return Result{}, fmt.Errorf("the runner's termination message is not a result: %w", err)
	}
	if r.Reason == "" || r.Key == "" {
		return Result{}, fmt.Errorf("the runner's termination message has no reason or key")
	}
	return r, nil
}

// ReasonDeleted is the reason of a successful Delete.
const ReasonDeleted = "Deleted"

// Failed is the result of an attempt that could not start.
func Failed(key string, err error) Result { return resultOf(key, Facts{}, source{}, err) }

// Delete removes the snapshot at key from store, when the backup whose UID
// is backupUID stored it: another backup's snapshot at the same key (it
// refused to overwrite it) stays.
func Delete(ctx context.Context, store Store, key, backupUID string) Result {
	existing, err := store.Find(ctx, key)
	if err != nil {
		return Failed(key, err)
	}
	if existing != nil && existing.Meta[MetaBackupUID] == backupUID {
		if err := store.Delete(ctx, key); err != nil {
			return Failed(key, err)
		}
	}
	return Result{Reason: ReasonDeleted, Key: key, Location: store.Location(key)}
}
