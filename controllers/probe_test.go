package controllers

import (
	"slices"
	"testing"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// TestMostAdvanced checks that the member list is asked of the member
// furthest along: a seed wiped and founding a cluster of its own again
// (same IDs, a short log) or a partitioned member that raised its term is
// asked last.
func TestMostAdvanced(t *testing.T) {
	t.Parallel()
	statuses := map[string]etcd.Status{
		"a-0": {RaftTerm: 2, RaftIndex: 4},    // wiped seed, founded anew
		"a-1": {RaftTerm: 3, RaftIndex: 1200}, // the leader's view
		"a-2": {RaftTerm: 9, RaftIndex: 1100}, // cut off, campaigning
		"a-3": {RaftTerm: 3, RaftIndex: 1200},
	}
	got := mostAdvanced(statuses)
	if want := []string{"a-1", "a-3", "a-2", "a-0"}; !slices.Equal(got, want) {
		t.Errorf("mostAdvanced() = %v, want %v", got, want)
	}
}
