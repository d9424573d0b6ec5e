package backup

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// Params is one attempt of a backup.
type Params struct {
	// Namespace, Cluster and BackupUID say whose snapshot it is; they go
	// into the snapshot's metadata.
	Namespace, Cluster, BackupUID string
	// Key is where the snapshot goes in Store.
	Key   string
	Store Store
	// Etcd reaches the cluster: the client URLs of its members as the
	// operator saw them, TLS and credentials. The members are listed again
	// from there, so members added since are found too.
	Etcd      etcd.Config
	NewClient func(etcd.Config) (etcd.Client, error)
}

// source is the member a snapshot came from.
type source struct {
	name, endpoint, clusterID, version string
	// storageVersion is what the snapshot stream reports: the storage
	// format's version, "3.6.0" for 3.6 members, "" before.
	storageVersion string
}

// maxSources is how many members one attempt streams from before it gives
// up: a member that goes away mid-stream (rolled, replaced) is followed by
// the next at once.
const maxSources = 3

// Run takes one snapshot: from the freshest healthy follower, into a
// staging file, checked against etcd's own hash, stored, read back and
// compared. It never overwrites a snapshot another backup stored.
func Run(ctx context.Context, p Params) Result {
	facts, from, err := run(ctx, p)
	r := resultOf(p.Key, facts, from, err)
	r.Location = p.Store.Location(p.Key)
	return r
}

func run(ctx context.Context, p Params) (Facts, source, error) {
	existing, err := p.Store.Find(ctx, p.Key)
	if err != nil {
		return Facts{}, source{}, err
	}
	if existing != nil {
		if existing.Meta[MetaBackupUID] != p.BackupUID {
			return Facts{}, source{}, failf(ReasonObjectExists, "%s already holds a snapshot this EtcdBackup did not take: a snapshot is never overwritten; create an EtcdBackup with another name, or remove the object", p.Store.Location(p.Key))
		}
		// An earlier attempt of this backup stored it and ended before
		// reporting: read it back rather than take another.
		return verifyStored(ctx, p, factsOf(existing.Meta), sourceOf(existing.Meta))
	}

	cli, err := p.NewClient(p.Etcd)
	if err != nil {
		return Facts{}, source{}, failf(ReasonNoHealthyMember, "connecting to the cluster: %v", err)
	}
	defer func() { _ = cli.Close() }()
	// Every write acknowledged before the attempt began is at or below
	// this revision; a snapshot from a follower that has not applied them
	// all yet is refused.
	atLeast, err := cli.Revision(ctx)
	if err != nil {
		return Facts{}, source{}, failf(ReasonNoHealthyMember, "reading the cluster's revision: %v", err)
	}
	sources, err := chooseSources(ctx, cli)
	if err != nil {
		return Facts{}, source{}, err
	}
	staging, err := p.Store.Staging(p.Key)
	if err != nil {
		return Facts{}, source{}, err
	}
	var facts Facts
	var from source
	var errs []string
	for _, s := range sources[:min(len(sources), maxSources)] {
		facts, err = writeChecked(staging, func(w io.Writer) error {
			var err error
			s.storageVersion, err = cli.Snapshot(ctx, s.endpoint, w)
			return err
		})
		if err == nil && facts.Revision < atLeast {
			err = fmt.Errorf("its snapshot is at revision %d, behind the cluster's %d when the attempt began: it has not applied every acknowledged write yet", facts.Revision, atLeast)
		}
		if err == nil {
			from = s
			break
		}
		errs = append(errs, fmt.Sprintf("member %s: %v", s.name, err))
	}
	if from.name == "" {
		return Facts{}, source{}, failf(ReasonSnapshotFailed, "no member gave an intact snapshot: %s", strings.Join(errs, "; "))
	}
	if err := p.Store.Put(ctx, p.Key, staging, facts, metaOf(facts, from, p.Namespace, p.Cluster, p.BackupUID)); err != nil {
		return Facts{}, source{}, err
	}
	return verifyStored(ctx, p, facts, from)
}

// verifyStored reads the snapshot at p.Key back and compares it with what
// was written; a snapshot that differs is removed and the attempt fails.
func verifyStored(ctx context.Context, p Params, facts Facts, from source) (Facts, source, error) {
	stored, err := p.Store.ReadBack(ctx, p.Key)
	if err != nil {
		return Facts{}, source{}, err
	}
	if problem := compareStored(stored, facts); problem != "" {
		_ = p.Store.Delete(ctx, p.Key)
		return Facts{}, source{}, failf(ReasonVerificationFailed, "%s read back differs from the snapshot taken (%s); it was removed", p.Store.Location(p.Key), problem)
	}
	return facts, from, nil
}

// compareStored says how stored differs from facts; "" when it does not.
func compareStored(stored Stored, facts Facts) string {
	switch {
	case facts.SHA256 == "" || facts.Size == 0:
		return "the metadata holds no SHA-256 or size"
	case stored.Size != facts.Size:
		return fmt.Sprintf("%d bytes, want %d", stored.Size, facts.Size)
	case stored.SHA256 != facts.SHA256:
		return fmt.Sprintf("SHA-256 %s, want %s", stored.SHA256, facts.SHA256)
	case stored.Meta[MetaSHA256] != facts.SHA256:
		return fmt.Sprintf("metadata SHA-256 %q, want %s", stored.Meta[MetaSHA256], facts.SHA256)
	}
	return ""
}

func factsOf(meta map[string]string) Facts {
	size, _ := strconv.ParseInt(meta[MetaSize], 10, 64)
	rev, _ := strconv.ParseInt(meta[MetaRevision], 10, 64)
	return Facts{Size: size, SHA256: meta[MetaSHA256], Revision: rev}
}

func sourceOf(meta map[string]string) source {
	return source{name: meta[MetaMember], clusterID: meta[MetaClusterID], version: meta[MetaVersion], storageVersion: meta[MetaStorage]}
}

// chooseSources lists the members and asks each for its status, at once.
func chooseSources(ctx context.Context, cli etcd.Client) ([]source, error) {
	clusterID, members, err := cli.MemberList(ctx)
	if err != nil {
		return nil, failf(ReasonNoHealthyMember, "listing the members: %v", err)
	}
	statuses := make([]*etcd.Status, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if len(m.ClientURLs) == 0 {
			continue
		}
		wg.Go(func() {
			if s, err := cli.Status(ctx, m.ClientURLs[0]); err == nil {
				statuses[i] = &s
			}
		})
	}
	wg.Wait()
	sources := snapshotSources(members, statuses)
	if len(sources) == 0 {
		return nil, failf(ReasonNoHealthyMember, "no voting member answers that can give a snapshot (a follower, or the only member)")
	}
	for i := range sources {
		sources[i].clusterID = etcd.FormatID(clusterID)
	}
	return sources, nil
}

// snapshotSources orders the members a snapshot may come from: voting
// followers that answered (statuses[i] is members[i]'s, nil when it did
// not answer), the most applied index first; the leader only when it is
// the only voter, so a backup never loads the member every write goes
// through; learners never (they may lag).
func snapshotSources(members []etcd.Member, statuses []*etcd.Status) []source {
	type candidate struct {
		source
		applied uint64
	}
	voters := 0
	for _, m := range members {
		if !m.IsLearner {
			voters++
		}
	}
	var out []candidate
	for i, m := range members {
		if m.IsLearner {
			continue
		}
		s := statuses[i]
		if s == nil || s.IsLearner || s.Leader == 0 {
			continue
		}
		if s.Leader == s.MemberID && voters > 1 {
			continue
		}
		out = append(out, candidate{source: source{name: m.Name, endpoint: s.Endpoint, version: s.Version}, applied: s.RaftAppliedIndex})
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.applied, a.applied), cmp.Compare(a.name, b.name))
	})
	sources := make([]source, len(out))
	for i, c := range out {
		sources[i] = c.source
	}
	return sources
}
