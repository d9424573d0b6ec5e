package fake_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// TestFakeScaleUpAndDown walks the fake through what the topology
// reconciler does: add a learner, wait for it, promote it, move leadership
// off a member and remove it.
func TestFakeScaleUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := fake.New(
		etcd.Member{ID: 1, Name: "etcd-0", PeerURLs: []string{"http://etcd-0:2380"}, ClientURLs: []string{"http://etcd-0:2379"}},
		etcd.Member{ID: 2, Name: "etcd-1", PeerURLs: []string{"http://etcd-1:2380"}, ClientURLs: []string{"http://etcd-1:2379"}},
	).WithAlarm(etcd.Alarm{MemberID: 2, Type: etcd.AlarmNoSpace})

	var c0 etcd.Client = c
	if c.Leader() != 1 {
		t.Fatalf("leader = %d, want the first voter 1", c.Leader())
	}
	learner, ms, err := c0.AddLearner(ctx, []string{"http://etcd-2:2380"})
	if err != nil || !learner.IsLearner || learner.ID != 3 || len(ms) != 3 {
		t.Fatalf("AddLearner = %+v, %d members, %v", learner, len(ms), err)
	}
	if _, _, err := c0.AddLearner(ctx, []string{"http://etcd-3:2380"}); err == nil {
		t.Error("a second learner was accepted, want etcd's refusal")
	}
	if _, _, err := c0.AddVoter(ctx, []string{"http://etcd-1:2380"}); err == nil {
		t.Error("a duplicate peer URL was accepted")
	}
	if err := c0.Promote(ctx, learner.ID); !errors.Is(err, etcd.ErrLearnerNotReady) {
		t.Errorf("Promote of a lagging learner = %v, want ErrLearnerNotReady", err)
	}
	c.SetCaughtUp(learner.ID)
	if err := c0.Promote(ctx, learner.ID); err != nil {
		t.Fatalf("Promote: %v", err)
	}

	if err := c0.MoveLeader(ctx, 2); err != nil || c.Leader() != 2 {
		t.Fatalf("MoveLeader(2) = %v, leader %d", err, c.Leader())
	}
	st, err := c0.Status(ctx, "http://etcd-0:2379")
	if err != nil || st.MemberID != 1 || st.Leader != 2 || st.Version != fake.DefaultVersion {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if err := c0.Remove(ctx, 2); err != nil {
		t.Fatalf("Remove(2): %v", err)
	}
	if c.Leader() != 1 {
		t.Errorf("after removing the leader, leader = %d, want 1", c.Leader())
	}
	if err := c0.Remove(ctx, 2); !errors.Is(err, etcd.ErrMemberNotFound) {
		t.Errorf("second Remove(2) = %v, want ErrMemberNotFound", err)
	}

	c.WithUnhealthy("http://etcd-0:2379", errors.New("boom"))
	if err := c0.Health(ctx, "http://etcd-0:2379"); err == nil {
		t.Error("Health of an unhealthy endpoint succeeded")
	}
	if err := c0.Health(ctx, "http://nowhere:2379"); err == nil {
		t.Error("Health of an endpoint no member serves succeeded")
	}
	alarms, err := c0.Alarms(ctx)
	if err != nil || len(alarms) != 1 || alarms[0].Type != etcd.AlarmNoSpace {
		t.Errorf("Alarms = %+v, %v", alarms, err)
	}

	injected := errors.New("injected")
	c.FailOnce(fake.MemberList, injected)
	if _, _, err := c0.MemberList(ctx); !errors.Is(err, injected) {
		t.Errorf("MemberList after FailOnce = %v, want the injected error", err)
	}
	_, ms, err = c0.MemberList(ctx)
	if err != nil {
		t.Fatalf("MemberList after the one-shot error: %v", err)
	}
	var ids []uint64
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []uint64{1, 3}) {
		t.Errorf("members = %v, want [1 3]", ids)
	}

	if err := c0.Close(); err != nil || !c.Closed() {
		t.Fatalf("Close = %v, closed %t", err, c.Closed())
	}
	if _, _, err := c0.MemberList(ctx); err == nil {
		t.Error("MemberList after Close succeeded")
	}
	if got := c.CallsOf(fake.Promote); len(got) != 2 || got[0].ID != learner.ID {
		t.Errorf("Promote calls = %+v, want two for member %d", got, learner.ID)
	}
	if got := c.CallsOf(fake.Health); len(got) != 2 || got[0].Endpoint != "http://etcd-0:2379" {
		t.Errorf("Health calls = %+v", got)
	}
}
