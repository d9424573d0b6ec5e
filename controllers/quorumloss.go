package controllers

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// quorumLoss is a quorum that cannot come back: more voters are gone with
// their data than the cluster can lose. Only a member whose Pod is gone
// and whose data went with it (an emptyDir, or its claim gone too) is
// gone; a member whose Pod exists is never gone, whatever else is wrong
// with it (cut off, paused, crash-looping, on a lost node): the operator
// waits for it.
type quorumLoss struct {
	// local is the member list the most advanced member that answers
	// knows.
	local  []etcd.Member
	voters int
	// gone are the voters whose data is gone, by name, with why.
	gone []goneMember
	// survivors are the voters that answer, the most advanced first (by
	// raft index, then term, then member ID).
	survivors []survivor
	// silent are the voters that are not gone and do not answer.
	silent []string
	// forGood is set when the voters left cannot form a quorum.
	forGood bool
}

type goneMember struct{ name, why string }

type survivor struct {
	name   string
	id     uint64
	status etcd.Status
}

// lostQuorum judges the quorum of the voters of p.local (the member list
// a member gives without a quorum): whether it is lost for good, and the
// evidence; false when there is nothing to judge. pods are c's member Pods by name, claims the members
// whose claims exist and are not being deleted. Only a cluster that has
// formed can lose its quorum, and only members of the cluster ID in c's
// status count: a list or an answer from another cluster is no evidence
// about this one.
func lostQuorum(c *etcdv1alpha1.EtcdCluster, p probe, pods map[string]*corev1.Pod, claims map[string]bool) (quorumLoss, bool) {
	if p.members != nil || p.local == nil || !ofCluster(c, p.localClusterID) {
		return quorumLoss{}, false
	}
	statusOf := map[uint64]etcd.Status{}
	for _, st := range p.statuses {
		if ofCluster(c, st.ClusterID) {
			statusOf[st.MemberID] = st
		}
	}
	l := quorumLoss{local: p.local}
	for _, m := range p.local {
		if m.IsLearner {
			continue
		}
		l.voters++
		name := memberName(c, m)
		if why, gone := memberDataGone(c, m, pods, claims); gone {
			l.gone = append(l.gone, goneMember{name: name, why: why})
		} else if st, ok := statusOf[m.ID]; ok {
			l.survivors = append(l.survivors, survivor{name: name, id: m.ID, status: st})
		} else {
			l.silent = append(l.silent, name)
		}
	}
	slices.SortFunc(l.gone, func(a, b goneMember) int { return strings.Compare(a.name, b.name) })
	slices.Sort(l.silent)
	slices.SortFunc(l.survivors, func(a, b survivor) int {
		if c := cmp.Compare(b.status.RaftIndex, a.status.RaftIndex); c != 0 {
			return c
		}
		if c := cmp.Compare(b.status.RaftTerm, a.status.RaftTerm); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	l.forGood = l.voters-len(l.gone) < etcdv1alpha1.Quorum(l.voters)
	return l, true
}

// ofCluster tells whether id is the cluster ID c's status records.
func ofCluster(c *etcdv1alpha1.EtcdCluster, id uint64) bool {
	return c.Status.ClusterID != "" && c.Status.ClusterID == etcd.FormatID(id)
}

// memberDataGone tells whether member m's data is gone, and why: its Pod is
// gone, and its data was on an emptyDir or its claim is gone too. The
// rule the topology replaces a single member by. A Pod that has not
// started on a claim that is gone or being deleted never will (a claim
// being deleted cannot be used again), so it is no Pod: chaos seed 1 lost
// a majority of five members with their claims, the operator had already
// created a new Pod for one of them from a cache that still showed its
// claim, and that Pending Pod kept the quorum "coming back" for good.
func memberDataGone(c *etcdv1alpha1.EtcdCluster, m etcd.Member, pods map[string]*corev1.Pod, claims map[string]bool) (string, bool) {
	name := memberName(c, m)
	persistent := c.Spec.Storage.UsesPersistentStorage()
	switch p := pods[name]; {
	case m.Name == "":
		return "", false // it never started: it has no data to lose
	case p != nil && persistent && !claims[name] && neverStarted(p):
		return "its claim " + builder.ClaimName(name) + " is gone or being deleted, and its Pod never started on it", true
	case p != nil:
		return "", false
	case !persistent:
		return "its Pod is gone, and its data was on an emptyDir", true
	case !claims[name]:
		return "its Pod and its claim " + builder.ClaimName(name) + " are gone", true
	}
	return "", false
}

// neverStarted tells whether Pod p has not run a container: not bound to
// a node, or no container running, ended, or restarted.
func neverStarted(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return true
	}
	for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil || st.RestartCount > 0 {
			return false
		}
	}
	return true
}

// message is the QuorumAvailable message of c: for a quorum that can
// come back, who answers and that the others keep their data; for one
// lost for good, the evidence and what the user can do.
func (l quorumLoss) message(c *etcdv1alpha1.EtcdCluster) string {
	var b strings.Builder
	if !l.forGood {
		answering := make([]string, len(l.survivors))
		for i, sv := range l.survivors {
			answering[i] = sv.name
		}
		fmt.Fprintf(&b, "No quorum: %d of %d voting members answer (%s), %d needed.", len(l.survivors), l.voters, strings.Join(answering, ", "), etcdv1alpha1.Quorum(l.voters))
		if len(l.silent) > 0 {
			fmt.Fprintf(&b, " %s keep their Pods and data: the quorum comes back when they answer.", strings.Join(l.silent, ", "))
		}
		if len(l.gone) > 0 {
			fmt.Fprintf(&b, " Gone with their data: %s.", strings.Join(l.goneNames(), ", "))
		}
		return b.String()
	}
	gone := make([]string, len(l.gone))
	for i, g := range l.gone {
		gone[i] = g.name + " (" + g.why + ")"
	}
	left := l.voters - len(l.gone)
	fmt.Fprintf(&b, "Quorum lost for good: %d of %d voting members are gone with their data: %s. The %d left cannot form a quorum of %d again.",
		len(l.gone), l.voters, strings.Join(gone, ", "), left, etcdv1alpha1.Quorum(l.voters))
	if len(l.survivors) > 0 {
		s := make([]string, len(l.survivors))
		for i, sv := range l.survivors {
			s[i] = fmt.Sprintf("%s (raft index %d, term %d, applied index %d)", sv.name, sv.status.RaftIndex, sv.status.RaftTerm, sv.status.RaftAppliedIndex)
		}
		fmt.Fprintf(&b, " Survivors, the most advanced first: %s.", strings.Join(s, ", "))
	}
	if len(l.silent) > 0 {
		fmt.Fprintf(&b, " Not answering, data kept: %s.", strings.Join(l.silent, ", "))
	}
	b.WriteString(" " + l.choice(c))
	return b.String()
}

// choice says what can be done about c's quorum, lost for good: rebuild
// the cluster from its most advanced survivor (on approval of the plan,
// or on its own with spec.recovery.quorumLoss Automatic), or restore a
// backup.
func (l quorumLoss) choice(c *etcdv1alpha1.EtcdCluster) string {
	plan := l.recoveryPlan(c)
	switch {
	case plan == nil:
		return "No member survives to rebuild the cluster from: restore a backup into a new EtcdCluster (docs/recovery.md)."
	case recoveryImpossible(c) != "":
		return recoveryImpossible(c)
	case l.waitsForSilent(c):
		return fmt.Sprintf("spec.recovery.quorumLoss is Automatic, but %s keep their Pods and do not answer: they may hold more than %s, and a rebuild would delete them, so the operator waits for them. To rebuild from %s now, annotate the EtcdCluster with %s=%s.",
			strings.Join(l.silent, ", "), plan.Survivor, plan.Survivor, etcdv1alpha1.AnnotationApproveRecovery, plan.ID)
	case c.QuorumLossPolicy() == etcdv1alpha1.QuorumLossAutomatic:
		return fmt.Sprintf("spec.recovery.quorumLoss is Automatic: the operator rebuilds the cluster from %s (plan %s in status.recoveryPlan).", plan.Survivor, plan.ID)
	}
	return fmt.Sprintf("status.recoveryPlan (ID %s) shows what rebuilding the cluster from %s could lose. To rebuild it, annotate the EtcdCluster with %s=%s; or restore a backup into a new EtcdCluster (docs/recovery.md).",
		plan.ID, plan.Survivor, etcdv1alpha1.AnnotationApproveRecovery, plan.ID)
}

// waitsForSilent tells whether an automatic rebuild of c waits: voters
// that keep their Pods but do not answer may hold more than the survivor
// (the rebuild retires their Pods and claims), so only a person's
// approval of the plan rebuilds without them.
func (l quorumLoss) waitsForSilent(c *etcdv1alpha1.EtcdCluster) bool {
	return c.QuorumLossPolicy() == etcdv1alpha1.QuorumLossAutomatic && len(l.silent) > 0
}

// recoveryImpossible says why c cannot be rebuilt from a survivor ("" when
// it can): with password authentication nothing authenticates without a
// quorum (etcd hands out its tokens through raft), so nothing can read the
// survivor's snapshot.
func recoveryImpossible(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Security.AuthEnabled() && !c.Spec.Security.OperatorClientCert() {
		return "The cluster cannot be rebuilt from a survivor: with password authentication (spec.security.enableAuth without client certificates) nothing authenticates to a member that has no quorum. Restore a backup into a new EtcdCluster (docs/recovery.md)."
	}
	return ""
}

// goneNames are the names of the gone members.
func (l quorumLoss) goneNames() []string {
	names := make([]string, len(l.gone))
	for i, g := range l.gone {
		names[i] = g.name
	}
	return names
}

// recoveryPlan is how c, whose quorum l is lost for good, could be
// rebuilt from its most advanced survivor (nil when it is not lost for
// good or nothing survives): that survivor's progress, the highest raft
// index any member of c was seen at (status.members keeps it while the
// quorum is lost), and the entries between the two.
func (l quorumLoss) recoveryPlan(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.RecoveryPlan {
	if !l.forGood || len(l.survivors) == 0 {
		return nil
	}
	sv := l.survivors[0]
	highest := sv.status.RaftIndex
	for _, m := range c.Status.Members {
		highest = max(highest, m.RaftIndex)
	}
	gone := make([]string, len(l.gone))
	for i, g := range l.gone {
		gone[i] = g.name + ": " + g.why
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\n%x\n%d\n%s", c.Status.ClusterID, sv.id, sv.status.RaftIndex, strings.Join(l.goneNames(), ",")))
	return &etcdv1alpha1.RecoveryPlan{
		ID:       hex.EncodeToString(sum[:])[:12],
		Survivor: sv.name, SurvivorID: etcd.FormatID(sv.id),
		RaftIndex: int64(sv.status.RaftIndex), RaftTerm: int64(sv.status.RaftTerm), AppliedIndex: int64(sv.status.RaftAppliedIndex),
		HighestRaftIndexSeen: int64(highest), EntriesAtRisk: int64(highest - sv.status.RaftIndex),
		Gone: gone,
	}
}
