package controllers

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// observed is what one reconcile pass sees of a cluster.
type observed struct {
	cluster *etcdv1alpha1.EtcdCluster
	// pods are the member Pods by name.
	pods map[string]*corev1.Pod
	// claims are the names of the members that have a claim.
	claims map[string]bool
	// members is etcd's member list; nil when no member answered.
	members []etcd.Member
	// clusterID is the cluster ID the member list came with.
	clusterID uint64
	// clusterIDs is the cluster ID each answering endpoint reports.
	clusterIDs map[string]uint64
	// leader is the ID of the leader, 0 when unknown.
	leader uint64
	// version is the etcd version a member reports.
	version string
	// healthy tells which voters answered a linearizable read.
	healthy map[uint64]bool
	// etcdErr is why members is nil.
	etcdErr error
}

// actionKind is the one step a reconcile pass takes.
type actionKind string

const (
	actNone       actionKind = "None"
	actWait       actionKind = "Wait"
	actCreateSeed actionKind = "CreateSeed"
	actCreatePod  actionKind = "CreatePod"
	actAddLearner actionKind = "AddLearner"
	actPromote    actionKind = "Promote"
	actRemove     actionKind = "RemoveMember"
	actDeletePod  actionKind = "DeletePod"
	actMoveLeader actionKind = "MoveLeader"
	actRefuse     actionKind = "Refuse"
)

// reasonClusterIDMismatch: members answer for different etcd clusters.
const reasonClusterIDMismatch = "ClusterIDMismatch"

// action is what plan decides: a kind, the member it concerns and why.
type action struct {
	kind   actionKind
	member string // the member's name
	id     uint64 // the member's etcd ID, when it has one
	// initialCluster is --initial-cluster for a Pod to create.
	initialCluster string
	reason         string
}

func (a action) String() string {
	s := string(a.kind)
	if a.member != "" {
		s += " " + a.member
	}
	if a.reason != "" {
		s += ": " + a.reason
	}
	return s
}

// plan decides the next step towards spec.replicas members from what the
// pass observed. It is pure: one change of membership at a time, Pods
// following etcd's member list, every step safe to repeat after a crash.
func plan(o observed) action {
	c := o.cluster
	want := int(c.DesiredReplicas())
	if o.members == nil {
		return planWithoutEtcd(o)
	}
	if eps := mismatchedEndpoints(o); len(eps) > 0 {
		return action{kind: actRefuse, reason: reasonClusterIDMismatch, member: strings.Join(eps, ", ")}
	}
	byName := map[string]etcd.Member{}
	for _, m := range o.members {
		byName[memberName(c, m)] = m
	}

	// Pods follow the member list: a member without a Pod gets one (a
	// crash between adding it and creating its Pod, or a deleted Pod whose
	// data survives), a Pod without a member goes (a crash between
	// removing the member and deleting its Pod).
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if _, ok := o.pods[name]; ok {
			continue
		}
		m := byName[name]
		dataKept := c.Spec.Storage.UsesPersistentStorage() && o.claims[name]
		if m.Name != "" && !dataKept {
			// It started once and its data went with its Pod (an emptyDir)
			// or its claim: it cannot come back as itself. Remove it; a
			// fresh member replaces it.
			return action{kind: actRemove, member: name, id: m.ID, reason: "the data of member " + name + " is gone with its Pod or claim; a new member replaces it"}
		}
		return action{kind: actCreatePod, member: name, id: m.ID, initialCluster: initialCluster(c, o.members),
			reason: "member " + name + " has no Pod"}
	}
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		if _, ok := byName[name]; !ok && o.pods[name].DeletionTimestamp == nil {
			return action{kind: actDeletePod, member: name, reason: "Pod " + name + " is not an etcd member"}
		}
	}

	voters, learners := split(o.members)
	if len(learners) > 0 {
		l := learners[0]
		return action{kind: actPromote, member: memberName(c, l), id: l.ID, reason: "learner " + memberName(c, l) + " waits to be promoted"}
	}
	switch {
	case len(voters) < want:
		return action{kind: actAddLearner, member: nextMemberName(c, o), reason: fmt.Sprintf("%d of %d members", len(voters), want)}
	case len(voters) > want:
		victim, ok := etcd.RemovalCandidate(voters, o.healthy, o.leader, func(a, b etcd.Member) int {
			return ordinal(c, memberName(c, a)) - ordinal(c, memberName(c, b))
		})
		if !ok {
			return action{kind: actWait, reason: "no member to remove"}
		}
		name := memberName(c, victim.Member)
		if victim.MoveLeaderFirst {
			return action{kind: actMoveLeader, member: name, id: victim.Member.ID, reason: "the leader is leaving"}
		}
		return action{kind: actRemove, member: name, id: victim.Member.ID,
			reason: fmt.Sprintf("%d members for %d replicas (%s)", len(voters), want, victim.Reason)}
	}
	return action{kind: actNone}
}

// planWithoutEtcd decides what to do when no member answers: found the
// cluster when there is nothing, else wait for the members to come up.
func planWithoutEtcd(o observed) action {
	if len(o.pods) == 0 {
		name := fmt.Sprintf("%s-0", o.cluster.Name)
		return action{kind: actCreateSeed, member: name, initialCluster: builder.InitialCluster(map[string]string{name: builder.PeerURL(o.cluster, name)}),
			reason: "the cluster has no members yet"}
	}
	return action{kind: actWait, reason: fmt.Sprintf("no member answers yet (%v)", o.etcdErr)}
}

// mismatchedEndpoints lists the endpoints that report another cluster ID
// than the member list's: members of two clusters behind one set of Pods,
// which no step can mend. The operator stops and says so.
func mismatchedEndpoints(o observed) []string {
	var eps []string
	for ep, id := range o.clusterIDs {
		if id != o.clusterID {
			eps = append(eps, fmt.Sprintf("%s reports cluster %s, not %s", ep, etcd.FormatID(id), etcd.FormatID(o.clusterID)))
		}
	}
	slices.Sort(eps)
	return eps
}

func split(members []etcd.Member) (voters, learners []etcd.Member) {
	for _, m := range members {
		if m.IsLearner {
			learners = append(learners, m)
		} else {
			voters = append(voters, m)
		}
	}
	return voters, learners
}

// memberName is a member's name: its own, or, for a learner that has not
// started, the host of its peer URL (<name>.<headless>...).
func memberName(c *etcdv1alpha1.EtcdCluster, m etcd.Member) string {
	if m.Name != "" {
		return m.Name
	}
	for _, p := range m.PeerURLs {
		if u, err := url.Parse(p); err == nil {
			if host, _, ok := strings.Cut(u.Hostname(), "."); ok || host != "" {
				return host
			}
		}
	}
	return etcd.FormatID(m.ID)
}

// ordinal is n of a member named <cluster>-<n>, or -1.
func ordinal(c *etcdv1alpha1.EtcdCluster, name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, c.Name+"-"))
	if err != nil || !strings.HasPrefix(name, c.Name+"-") {
		return -1
	}
	return n
}

// nextMemberName is <cluster>-<n> for an n higher than any member or Pod
// has: names are never reused, so a new member cannot be mistaken for a
// removed one.
func nextMemberName(c *etcdv1alpha1.EtcdCluster, o observed) string {
	highest := -1
	for name := range o.pods {
		highest = max(highest, ordinal(c, name))
	}
	for _, m := range o.members {
		highest = max(highest, ordinal(c, memberName(c, m)))
	}
	return fmt.Sprintf("%s-%d", c.Name, highest+1)
}

// initialCluster is --initial-cluster for a member joining: every member
// etcd knows, by name and peer URL.
func initialCluster(c *etcdv1alpha1.EtcdCluster, members []etcd.Member) string {
	peers := map[string]string{}
	for _, m := range members {
		if len(m.PeerURLs) > 0 {
			peers[memberName(c, m)] = m.PeerURLs[0]
		}
	}
	return builder.InitialCluster(peers)
}
