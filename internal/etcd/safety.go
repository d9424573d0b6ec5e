package etcd

import (
	"cmp"
	"fmt"
	"slices"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// The membership safety rules. They are pure functions of what a reconciler
// observed in this pass: the member list and which members are healthy. An
// ID missing from healthy counts as unhealthy, so that a member nobody could
// probe is never counted towards a quorum. Errors explain the refusal in a
// sentence fit for a condition message or an event.

// CanRemove refuses to remove member id when that could cost the cluster its
// quorum or overlap with another membership change:
//   - id is not a member;
//   - id is the last voting member;
//   - the cluster has no quorum of healthy voters now (the removal could
//     not commit), or would not have one without id;
//   - a learner other than id is pending promotion (one change at a time).
//
// Removing a learner is always allowed: it never changes the quorum, and
// it is how a failed addition is rolled back.
func CanRemove(members []Member, healthy map[uint64]bool, id uint64) error {
	i := slices.IndexFunc(members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return fmt.Errorf("member %s is not in the member list", FormatID(id))
	}
	target := members[i]
	if target.IsLearner {
		return nil
	}
	if learner, ok := pendingLearner(members); ok {
		return fmt.Errorf("learner %s is pending promotion; remove voting member %s after it is promoted or removed (one membership change at a time)",
			describe(learner), describe(target))
	}
	voters, healthyVoters := countVoters(members, healthy)
	if voters == 1 {
		return fmt.Errorf("member %s is the last voting member", describe(target))
	}
	if healthyVoters < etcdv1alpha1.Quorum(voters) {
		return fmt.Errorf("only %d of %d voting members are healthy and quorum is %d: the cluster cannot commit a removal",
			healthyVoters, voters, etcdv1alpha1.Quorum(voters))
	}
	remaining, healthyRemaining := voters-1, healthyVoters
	if healthy[id] {
		healthyRemaining--
	}
	if healthyRemaining < etcdv1alpha1.Quorum(remaining) {
		return fmt.Errorf("removing member %s would leave %d healthy of %d voting members, below the quorum of %d",
			describe(target), healthyRemaining, remaining, etcdv1alpha1.Quorum(remaining))
	}
	return nil
}

// CanAdd refuses to add a member while a learner is pending promotion (one
// change at a time; etcd allows one learner by default too) or while the
// cluster has no quorum of healthy voters to commit the change.
func CanAdd(members []Member, healthy map[uint64]bool) error {
	if learner, ok := pendingLearner(members); ok {
		return fmt.Errorf("learner %s is pending promotion; add the next member after it is promoted or removed (one membership change at a time)",
			describe(learner))
	}
	voters, healthyVoters := countVoters(members, healthy)
	if voters == 0 {
		return fmt.Errorf("the cluster has no voting members")
	}
	if healthyVoters < etcdv1alpha1.Quorum(voters) {
		return fmt.Errorf("only %d of %d voting members are healthy and quorum is %d: the cluster cannot commit an addition",
			healthyVoters, voters, etcdv1alpha1.Quorum(voters))
	}
	return nil
}

// RemovalReason says why RemovalCandidate chose a member.
type RemovalReason string

// Removal reasons, in the order RemovalCandidate prefers them.
const (
	// RemoveLaggingLearner: a learner that has not caught up; nothing
	// depends on it yet.
	RemoveLaggingLearner RemovalReason = "LaggingLearner"
	// RemoveUnhealthyVoter: removing a sick voter costs no healthy capacity.
	RemoveUnhealthyVoter RemovalReason = "UnhealthyVoter"
	// RemoveLearner: a caught-up learner; it never counted towards quorum.
	RemoveLearner RemovalReason = "Learner"
	// RemoveNewestVoter: all voters are healthy; the newest goes first.
	RemoveNewestVoter RemovalReason = "NewestVoter"
)

// Removal is the member RemovalCandidate chose.
type Removal struct {
	// Member is the member to remove.
	Member Member
	// Reason says why it was chosen.
	Reason RemovalReason
	// MoveLeaderFirst is set when Member is the leader: move leadership to
	// another voter (Client.MoveLeader) and choose again on the next pass,
	// rather than remove the leader and wait for an election.
	MoveLeaderFirst bool
}

// RemovalCandidate chooses the member to remove when scaling down by one, or
// returns false when there is no member. It only chooses: ask CanRemove
// whether removing the choice is safe now, before moving leadership for it.
//
// It prefers, in order: a learner that has not caught up, an unhealthy
// voter, a caught-up learner, then the newest healthy voter. Within each
// group it takes the newest member, and it takes the leader only when no
// other member of the group is left; MoveLeaderFirst then says so. An
// unhealthy leader is chosen before any healthy voter: keeping a sick
// member and removing a healthy one would cost the cluster twice.
//
// healthy has the same meaning as in CanRemove; for a learner it means the
// learner has caught up with the leader (the caller decides how, for
// example from Status raft indexes). leader is the leader's ID (0 when
// unknown). cmpAge orders members oldest first like slices.SortFunc: it
// returns a negative number when a is older than b. Member IDs are random
// and say nothing about age, so the caller supplies the order it knows,
// such as the ordinal in the member's Pod name; among members of the same
// age the highest ID goes first, so the choice is stable.
func RemovalCandidate(members []Member, healthy map[uint64]bool, leader uint64, cmpAge func(a, b Member) int) (Removal, bool) {
	groups := []struct {
		reason RemovalReason
		in     func(Member) bool
	}{
		{RemoveLaggingLearner, func(m Member) bool { return m.IsLearner && !healthy[m.ID] }},
		{RemoveUnhealthyVoter, func(m Member) bool { return !m.IsLearner && !healthy[m.ID] }},
		{RemoveLearner, func(m Member) bool { return m.IsLearner && healthy[m.ID] }},
		{RemoveNewestVoter, func(m Member) bool { return !m.IsLearner && healthy[m.ID] }},
	}
	// Newest first, the leader last.
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b Member) int {
		if (a.ID == leader) != (b.ID == leader) {
			if a.ID == leader {
				return 1
			}
			return -1
		}
		if c := cmpAge(b, a); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	for _, g := range groups {
		for _, m := range sorted {
			if g.in(m) {
				return Removal{Member: m, Reason: g.reason, MoveLeaderFirst: m.ID == leader && !m.IsLearner}, true
			}
		}
	}
	return Removal{}, false
}

func countVoters(members []Member, healthy map[uint64]bool) (voters, healthyVoters int) {
	for _, m := range members {
		if m.IsLearner {
			continue
		}
		voters++
		if healthy[m.ID] {
			healthyVoters++
		}
	}
	return voters, healthyVoters
}

func pendingLearner(members []Member) (Member, bool) {
	i := slices.IndexFunc(members, func(m Member) bool { return m.IsLearner })
	if i < 0 {
		return Member{}, false
	}
	return members[i], true
}

// describe names a member in messages: its hex ID and, once it has started,
// its name.
func describe(m Member) string {
	if m.Name == "" {
		return FormatID(m.ID)
	}
	return fmt.Sprintf("%s (%s)", FormatID(m.ID), m.Name)
}
