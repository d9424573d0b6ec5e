package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// probe is one look at a cluster's members through etcd, shared by the
// topology and health reconcilers.
type probe struct {
	// statuses are the answers of the endpoints that answered, and errs
	// why the others did not, by endpoint.
	statuses map[string]etcd.Status
	errs     map[string]error
	// members is etcd's member list; nil when no member answered, and err
	// then says why.
	members []etcd.Member
	err     error
	// clusterID is the cluster ID the member list came with.
	clusterID uint64
	// local is, when no member gave the member list (it needs a quorum),
	// the list as the most advanced member that answers knows it, and
	// localClusterID its cluster ID: what tells a quorum lost for good
	// from one that will come back.
	local          []etcd.Member
	localClusterID uint64
	// leader is the leader's ID as the members see it, 0 when unknown;
	// version is the leader's etcd version (or any member's).
	leader  uint64
	version string
	// health is the result of a linearizable read (serializable for a
	// learner) on each member, by ID: nil when it answered.
	health map[uint64]error
	// alarms are the active alarms, when asked for; alarmsErr is why they
	// are unknown.
	alarms    []etcd.Alarm
	alarmsErr error
}

// healthyVoters tells which voters answered a linearizable read.
func (p probe) healthyVoters() map[uint64]bool {
	healthy := map[uint64]bool{}
	for _, m := range p.members {
		if !m.IsLearner {
			err, probed := p.health[m.ID]
			healthy[m.ID] = probed && err == nil
		}
	}
	return healthy
}

// probeMembers asks every endpoint for its status, alone and in parallel,
// then asks those that answered for the member list (so a paused member
// cannot stall the pass), then every member for a linearizable read, in
// parallel, and, when withAlarms, the cluster for its alarms. Every call
// is bounded by the client's call timeout.
func probeMembers(ctx context.Context, newClient EtcdClientFactory, c *etcdv1alpha1.EtcdCluster, endpoints []string, withAlarms bool) probe {
	p := probe{statuses: map[string]etcd.Status{}, errs: map[string]error{}, health: map[uint64]error{}}
	if len(endpoints) == 0 {
		p.err = errors.New("no member Pod is running")
		return p
	}
	ec, err := newClient(ctx, c, endpoints)
	if err != nil {
		p.err = err
		return p
	}
	defer func() { _ = ec.Close() }()

	var mu sync.Mutex
	parallel(endpoints, func(ep string) {
		st, err := ec.Status(ctx, ep)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			p.errs[ep] = err
			return
		}
		st.Endpoint = ep
		p.statuses[ep] = st
	})
	answering := slices.Sorted(maps.Keys(p.statuses))
	if len(answering) == 0 {
		p.err = fmt.Errorf("no member answers: %w", errors.Join(mapValues(p.errs)...))
		return p
	}
	for _, ep := range answering {
		st := p.statuses[ep]
		if st.MemberID == st.Leader || p.leader == 0 {
			p.leader, p.version = st.Leader, st.Version
		}
	}
	ordered := mostAdvanced(p.statuses)
	if p.leader == 0 {
		// A linearizable member list needs a leader. Without one it waits
		// out the call timeout on each member asked, unless an election
		// ends meanwhile, which takes a quorum of voters: when those that
		// answer are fewer, it is not asked for. A cluster that lost its
		// quorum got its passes 5 s longer for every survivor; one that is
		// electing (a quorum answers) still waits for its leader.
		p.localClusterID, p.local = localMembers(ctx, newClient, c, ordered)
		if answering, voters := answeringVoters(p.local, p.statuses); p.local != nil && answering < etcdv1alpha1.Quorum(voters) {
			p.err = fmt.Errorf("no member list: %d of %d voting members answer, fewer than a quorum, and none knows a leader", answering, voters)
			return p
		}
	}
	// The member list comes from the most advanced member that gives it:
	// one whose data was wiped, or that lags, is never taken as the truth.
	var lc etcd.Client
	for _, ep := range ordered {
		if lc, err = newClient(ctx, c, []string{ep}); err != nil {
			p.err = err
			return p
		}
		if p.clusterID, p.members, p.err = lc.MemberList(ctx); p.err == nil {
			break
		}
		_ = lc.Close()
		lc = nil
	}
	if lc == nil {
		p.members = nil
		if p.local == nil {
			p.localClusterID, p.local = localMembers(ctx, newClient, c, ordered)
		}
		return p
	}
	defer func() { _ = lc.Close() }()
	p.localClusterID, p.local = 0, nil
	parallel(p.members, func(m etcd.Member) {
		if len(m.ClientURLs) == 0 {
			return // a learner that has not started
		}
		err := ec.Health(ctx, m.ClientURLs[0])
		mu.Lock()
		p.health[m.ID] = err
		mu.Unlock()
	})
	// Listing the alarms is a raft proposal, a log entry at every probe of
	// every cluster (and a status write, since the raft index moves); a
	// member's status lists them too, so they are listed only when one
	// does.
	if withAlarms && slices.ContainsFunc(slices.Collect(maps.Values(p.statuses)), etcd.Status.ReportsAlarms) {
		p.alarms, p.alarmsErr = lc.Alarms(ctx)
	}
	return p
}

// answeringVoters counts the voters of members, and those of them whose
// status answered.
func answeringVoters(members []etcd.Member, statuses map[string]etcd.Status) (answering, voters int) {
	answered := map[uint64]bool{}
	for _, st := range statuses {
		answered[st.MemberID] = true
	}
	for _, m := range members {
		if !m.IsLearner {
			voters++
			if answered[m.ID] {
				answering++
			}
		}
	}
	return answering, voters
}

// localMembers is the cluster ID and member list as the first of
// endpoints that gives them without a quorum knows them; nil members when
// none does.
func localMembers(ctx context.Context, newClient EtcdClientFactory, c *etcdv1alpha1.EtcdCluster, endpoints []string) (uint64, []etcd.Member) {
	for _, ep := range endpoints {
		ec, err := newClient(ctx, c, []string{ep})
		if err != nil {
			return 0, nil
		}
		id, members, err := ec.LocalMemberList(ctx)
		_ = ec.Close()
		if err == nil {
			return id, members
		}
	}
	return 0, nil
}

// mostAdvanced orders the endpoints that answered by how far their
// member's raft log goes, the furthest first: by committed index (a
// partitioned member may have raised its term but not its index), then
// term, then endpoint, so the order is stable.
func mostAdvanced(statuses map[string]etcd.Status) []string {
	eps := slices.Collect(maps.Keys(statuses))
	slices.SortFunc(eps, func(a, b string) int {
		sa, sb := statuses[a], statuses[b]
		if c := cmp.Compare(sb.RaftIndex, sa.RaftIndex); c != 0 {
			return c
		}
		if c := cmp.Compare(sb.RaftTerm, sa.RaftTerm); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return eps
}

// parallel calls f on every item at once and waits for all.
func parallel[T any](items []T, f func(T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { f(it) })
	}
	wg.Wait()
}

func mapValues(m map[string]error) []error {
	out := make([]error, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}
