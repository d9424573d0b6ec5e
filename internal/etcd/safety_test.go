package etcd

import (
	"cmp"
	"strings"
	"testing"
)

func voter(id uint64) Member   { return Member{ID: id, Name: "etcd-" + FormatID(id)} }
func learner(id uint64) Member { return Member{ID: id, IsLearner: true} }

func healthyIDs(ids ...uint64) map[uint64]bool {
	h := map[uint64]bool{}
	for _, id := range ids {
		h[id] = true
	}
	return h
}

// checkErr fails unless err is nil when want is empty, or contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("got error %q, want none", err)
	case want != "" && err == nil:
		t.Errorf("got no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("got error %q, want one containing %q", err, want)
	}
}

func TestCanRemove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		members []Member
		healthy map[uint64]bool
		id      uint64
		wantErr string
	}{
		{
			name:    "healthy voter of three",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2, 3),
			id:      3,
		},
		{
			name:    "unhealthy voter of three",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2),
			id:      3,
		},
		{
			name:    "healthy voter while another is unhealthy",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2),
			id:      2,
			wantErr: "removing member 2 (etcd-2) would leave 1 healthy of 2 voting members, below the quorum of 2",
		},
		{
			name:    "member missing from healthy counts as unhealthy",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: map[uint64]bool{1: true, 2: true},
			id:      1,
			wantErr: "would leave 1 healthy of 2 voting members",
		},
		{
			name:    "last voting member",
			members: []Member{voter(1)},
			healthy: healthyIDs(1),
			id:      1,
			wantErr: "member 1 (etcd-1) is the last voting member",
		},
		{
			name:    "no quorum now",
			members: []Member{voter(1), voter(2), voter(3), voter(4)},
			healthy: healthyIDs(1, 2),
			id:      4,
			wantErr: "only 2 of 4 voting members are healthy and quorum is 3",
		},
		{
			// Two voters with one down have no quorum: even removing the
			// dead one cannot commit (that needs quorum-loss recovery).
			name:    "unhealthy voter of two",
			members: []Member{voter(1), voter(2)},
			healthy: healthyIDs(1),
			id:      2,
			wantErr: "only 1 of 2 voting members are healthy and quorum is 2: the cluster cannot commit a removal",
		},
		{
			name:    "voter while a learner is pending",
			members: []Member{voter(1), voter(2), voter(3), learner(4)},
			healthy: healthyIDs(1, 2, 3),
			id:      3,
			wantErr: "learner 4 is pending promotion; remove voting member 3 (etcd-3) after it is promoted or removed",
		},
		{
			name:    "the pending learner itself",
			members: []Member{voter(1), learner(4)},
			healthy: healthyIDs(1),
			id:      4,
		},
		{
			name:    "a learner while the cluster has no quorum",
			members: []Member{voter(1), voter(2), voter(3), learner(4)},
			healthy: healthyIDs(1),
			id:      4,
		},
		{
			name:    "unknown member",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2, 3),
			id:      0xabc,
			wantErr: "member abc is not in the member list",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, CanRemove(tt.members, tt.healthy, tt.id), tt.wantErr)
		})
	}
}

func TestCanAdd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		members []Member
		healthy map[uint64]bool
		wantErr string
	}{
		{
			name:    "healthy cluster",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2, 3),
		},
		{
			name:    "one unhealthy of three",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1, 2),
		},
		{
			name:    "single member",
			members: []Member{voter(1)},
			healthy: healthyIDs(1),
		},
		{
			name:    "learner pending",
			members: []Member{voter(1), learner(2)},
			healthy: healthyIDs(1, 2),
			wantErr: "learner 2 is pending promotion; add the next member after it is promoted or removed",
		},
		{
			name:    "no quorum",
			members: []Member{voter(1), voter(2), voter(3)},
			healthy: healthyIDs(1),
			wantErr: "only 1 of 3 voting members are healthy and quorum is 2",
		},
		{
			name:    "no voters",
			members: nil,
			healthy: nil,
			wantErr: "the cluster has no voting members",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, CanAdd(tt.members, tt.healthy), tt.wantErr)
		})
	}
}

func TestRemovalCandidate(t *testing.T) {
	t.Parallel()
	// Members are named by ordinal: a higher ID here is a newer member.
	byID := func(a, b Member) int { return cmp.Compare(a.ID, b.ID) }
	// Ages reversed from IDs, to show the order comes from cmpAge.
	byIDReversed := func(a, b Member) int { return cmp.Compare(b.ID, a.ID) }
	sameAge := func(a, b Member) int { return 0 }
	tests := []struct {
		name       string
		members    []Member
		healthy    map[uint64]bool
		leader     uint64
		cmpAge     func(a, b Member) int
		want       uint64
		wantReason RemovalReason
		wantMove   bool
		wantNone   bool
	}{
		{
			name:       "newest healthy voter",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(1, 2, 3),
			leader:     1,
			cmpAge:     byID,
			want:       3,
			wantReason: RemoveNewestVoter,
		},
		{
			name:       "age comes from cmpAge, not the ID",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(1, 2, 3),
			leader:     3,
			cmpAge:     byIDReversed,
			want:       1,
			wantReason: RemoveNewestVoter,
		},
		{
			name:       "newest is the leader: the next newest",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(1, 2, 3),
			leader:     3,
			cmpAge:     byID,
			want:       2,
			wantReason: RemoveNewestVoter,
		},
		{
			name:       "unhealthy voter before the newest",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(2, 3),
			leader:     2,
			cmpAge:     byID,
			want:       1,
			wantReason: RemoveUnhealthyVoter,
		},
		{
			name:       "newest of two unhealthy voters",
			members:    []Member{voter(1), voter(2), voter(3), voter(4), voter(5)},
			healthy:    healthyIDs(1, 4, 5),
			leader:     1,
			cmpAge:     byID,
			want:       3,
			wantReason: RemoveUnhealthyVoter,
		},
		{
			name:       "lagging learner before an unhealthy voter",
			members:    []Member{voter(1), voter(2), voter(3), learner(4)},
			healthy:    healthyIDs(1, 2),
			leader:     1,
			cmpAge:     byID,
			want:       4,
			wantReason: RemoveLaggingLearner,
		},
		{
			name:       "unhealthy voter before a caught-up learner",
			members:    []Member{voter(1), voter(2), voter(3), learner(4)},
			healthy:    healthyIDs(1, 2, 4),
			leader:     1,
			cmpAge:     byID,
			want:       3,
			wantReason: RemoveUnhealthyVoter,
		},
		{
			name:       "caught-up learner before a healthy voter",
			members:    []Member{voter(1), voter(2), voter(3), learner(4)},
			healthy:    healthyIDs(1, 2, 3, 4),
			leader:     1,
			cmpAge:     byID,
			want:       4,
			wantReason: RemoveLearner,
		},
		{
			name:       "unhealthy leader before a healthy voter, leadership moves first",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(2, 3),
			leader:     1,
			cmpAge:     byID,
			want:       1,
			wantReason: RemoveUnhealthyVoter,
			wantMove:   true,
		},
		{
			name:       "only the leader is left",
			members:    []Member{voter(1)},
			healthy:    healthyIDs(1),
			leader:     1,
			cmpAge:     byID,
			want:       1,
			wantReason: RemoveNewestVoter,
			wantMove:   true,
		},
		{
			name:       "leader unknown",
			members:    []Member{voter(1), voter(2), voter(3)},
			healthy:    healthyIDs(1, 2, 3),
			cmpAge:     byID,
			want:       3,
			wantReason: RemoveNewestVoter,
		},
		{
			name:       "same age: highest ID, for a stable choice",
			members:    []Member{voter(2), voter(3), voter(1)},
			healthy:    healthyIDs(1, 2, 3),
			leader:     1,
			cmpAge:     sameAge,
			want:       3,
			wantReason: RemoveNewestVoter,
		},
		{
			name:     "no members",
			cmpAge:   byID,
			wantNone: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := RemovalCandidate(tt.members, tt.healthy, tt.leader, tt.cmpAge)
			if tt.wantNone {
				if ok {
					t.Fatalf("got %+v, want no candidate", got)
				}
				return
			}
			if !ok {
				t.Fatal("got no candidate")
			}
			if got.Member.ID != tt.want || got.Reason != tt.wantReason || got.MoveLeaderFirst != tt.wantMove {
				t.Errorf("got member %s reason %s moveLeaderFirst %t, want member %s reason %s moveLeaderFirst %t",
					FormatID(got.Member.ID), got.Reason, got.MoveLeaderFirst, FormatID(tt.want), tt.wantReason, tt.wantMove)
			}
		})
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	for _, id := range []uint64{1, 0x8e9e05c52164694d, ^uint64(0)} {
		s := FormatID(id)
		got, err := ParseID(s)
		if err != nil || got != id {
			t.Errorf("ParseID(FormatID(%d) = %q) = %d, %v", id, s, got, err)
		}
	}
	if got := FormatID(0x8e9e05c52164694d); got != "8e9e05c52164694d" {
		t.Errorf("FormatID = %q, want etcdctl's 8e9e05c52164694d", got)
	}
	for _, s := range []string{"", "xyz", "-1", "1ffffffffffffffff"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) succeeded, want an error", s)
		}
	}
}
