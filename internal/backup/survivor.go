package backup

import (
	"context"
	"fmt"
	"io"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// ReasonNotTheSurvivor is a restore's result when the member it was to
// read is not the one the recovery plan chose, or has not applied what
// the plan counted on.
const ReasonNotTheSurvivor = "NotTheSurvivor"

// Source is what a restore reads its snapshot from: a Store, or the
// survivor of a quorum lost for good.
type Source interface {
	// Location names key for humans.
	Location(key string) string
	// Fetch streams the snapshot at key into w.
	Fetch(ctx context.Context, key string, w io.Writer) error
}

// Survivor is the member a recovery plan chose to rebuild a cluster from:
// it has no quorum, but serves its status and a snapshot of its own
// backend (neither goes through raft). It is read only when it is still
// that member of that cluster and has applied every entry it held when
// the plan was made, so the snapshot holds everything the plan promised.
type Survivor struct {
	// Etcd reaches the member: its client URL alone, and TLS. A password
	// cannot authenticate without a quorum (etcd hands out its tokens
	// through raft), so it has none.
	Etcd      etcd.Config
	NewClient func(etcd.Config) (etcd.Client, error)
	// MemberID and ClusterID are the member's IDs in the plan.
	MemberID, ClusterID uint64
	// RaftIndex is the member's raft index in the plan: its applied index
	// must have reached it.
	RaftIndex uint64
}

// Location is the member and its URL; a survivor has no keys.
func (s Survivor) Location(string) string {
	return fmt.Sprintf("member %s of cluster %s at %s", etcd.FormatID(s.MemberID), etcd.FormatID(s.ClusterID), s.endpoint())
}

func (s Survivor) endpoint() string {
	if len(s.Etcd.Endpoints) == 0 {
		return ""
	}
	return s.Etcd.Endpoints[0]
}

// Fetch checks the member's status against the plan, then streams its
// snapshot into w.
func (s Survivor) Fetch(ctx context.Context, _ string, w io.Writer) error {
	cli, err := s.NewClient(s.Etcd)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", s.Location(""), err)
	}
	defer func() { _ = cli.Close() }()
	st, err := cli.Status(ctx, s.endpoint())
	if err != nil {
		return fmt.Errorf("reading the status of %s: %w", s.Location(""), err)
	}
	if err := s.check(st); err != nil {
		return err
	}
	if _, err := cli.Snapshot(ctx, s.endpoint(), w); err != nil {
		return fmt.Errorf("streaming the snapshot of %s: %w", s.Location(""), err)
	}
	return nil
}

// check says how a status differs from the plan's survivor.
func (s Survivor) check(st etcd.Status) error {
	switch {
	case st.MemberID != s.MemberID || st.ClusterID != s.ClusterID:
		return failf(ReasonNotTheSurvivor, "%s answers as member %s of cluster %s, not the plan's survivor: nothing is restored from it",
			s.endpoint(), etcd.FormatID(st.MemberID), etcd.FormatID(st.ClusterID))
	case st.RaftAppliedIndex < s.RaftIndex:
		return failf(ReasonNotTheSurvivor, "%s has applied raft index %d, not yet the %d the plan counts on: its snapshot would miss entries it holds; retried",
			s.Location(""), st.RaftAppliedIndex, s.RaftIndex)
	}
	return nil
}
