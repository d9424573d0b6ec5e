package controllers

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcdversion"
)

// observed is what one reconcile pass sees of a cluster.
type observed struct {
	cluster *etcdv1alpha1.EtcdCluster
	// pods are the member Pods by name.
	pods map[string]*corev1.Pod
	// claims are the names of the members that have a claim.
	claims map[string]bool
	// allClaims also has the claims being deleted.
	allClaims map[string]bool
	// now is when the pass observed.
	now time.Time
	// members is etcd's member list; nil when no member answered.
	members []etcd.Member
	// clusterID is the cluster ID the member list came with.
	clusterID uint64
	// clusterIDs is the cluster ID each answering endpoint reports.
	clusterIDs map[string]uint64
	// leader is the ID of the leader, 0 when unknown.
	leader uint64
	// version is the etcd version a member reports; versions is each
	// answering member's, by Pod name.
	version  string
	versions map[string]string
	// appliedIndexes is the raft applied index of each member that
	// answered its status, by Pod name: how far a learner has caught up.
	appliedIndexes map[string]uint64
	// healthy tells which voters answered a linearizable read.
	healthy map[uint64]bool
	// lostNodes are the nodes of member Pods that are not Ready: their
	// kubelet no longer runs or reports the Pods.
	lostNodes map[string]bool
	// etcdErr is why members is nil.
	etcdErr error
	// trustHash is the hash of the trust bundle member Pods start with;
	// empty without TLS, or before the PKI reconciler has gathered it.
	trustHash string
	// restore is, for a cluster founded from spec.bootstrap.restore, the
	// EtcdBackup it restores; restoreProblem says why it cannot (a
	// refusal reason and message) while it is nil.
	restore        *etcdv1alpha1.EtcdBackup
	restoreProblem *restoreRefusal
	// loss is, when no member gives the member list, what the members
	// that answer tell about the quorum (forGood false otherwise).
	loss quorumLoss
	// retiring are, while a recovery runs, the old cluster's Pods it
	// retires (status.recovery.retired), by name; pods leaves them out.
	retiring map[string]*corev1.Pod
	// image is the operator's image, which restoring seeds run.
	image string
}

// restoreRefusal is why a cluster cannot restore yet: a refusal's reason
// and message.
type restoreRefusal struct{ reason, message string }

// outdated tells whether Pod p was built from another spec than the one
// of specHash (builder.PodSpecHash, computed once by the caller) or
// started with an older trust bundle than o's.
func (o observed) outdated(p *corev1.Pod, specHash string) bool {
	return p.Annotations[etcdv1alpha1.AnnotationPodSpecHash] != specHash ||
		o.trustHash != "" && p.Annotations[etcdv1alpha1.AnnotationTrustBundleHash] != o.trustHash
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
	actRoll       actionKind = "RollMember"
	actSealSeed   actionKind = "SealSeed"
	actSetPeers   actionKind = "SetInitialCluster"
	actNoteIndex  actionKind = "NoteLearnerProgress"
	// actStartRecovery records an approved recovery in the status;
	// actCompleteRecovery records that it is complete.
	// actCreateRecoverySeed and actRetirePod are a recovery's own
	// CreateSeed and DeletePod: the seed that restores the survivor, and
	// the deletion of an old cluster's Pod.
	actStartRecovery      actionKind = "StartRecovery"
	actCreateRecoverySeed actionKind = "CreateRecoverySeed"
	actRetirePod          actionKind = "RetirePod"
	actCompleteRecovery   actionKind = "CompleteRecovery"
	actRefuse             actionKind = "Refuse"
	actBlocked            actionKind = "Blocked"
)

// action is what plan decides: a kind, the member it concerns and why.
type action struct {
	kind   actionKind
	member string // the member's name
	id     uint64 // the member's etcd ID, when it has one
	// started tells whether the member ran before: its Pod must find its
	// data, so no claim is created for it.
	started bool
	// initialCluster is --initial-cluster for a Pod to create.
	initialCluster string
	// restore is, for an actCreateSeed of a cluster restored from a
	// backup, the EtcdBackup its seed restores.
	restore *etcdv1alpha1.EtcdBackup
	// recovery is, for an actStartRecovery, the recovery to record; for
	// an actCreateSeed of a recovery, the recovery its seed restores.
	recovery *etcdv1alpha1.RecoveryStatus
	// founders are, for an actCreateSeed, every founder without a Pod
	// (member first): their Pods are created together.
	founders []string
	// stale are, for an actSetPeers, the Pods whose --initial-cluster is
	// not initialCluster (member first): all are updated together.
	stale []string
	// force deletes a Pod at once: its node is lost, so its kubelet would
	// never confirm the deletion; its member is no longer in etcd.
	force bool
	// progress is what an actNoteIndex records on the learner's Pod.
	progress learnerProgress
	// refusal is the condition reason of an actRefuse.
	refusal string
	reason  string
	// until is, for a wait that ends at a known time (an unhealthy
	// member's replacement), that time: no pass comes later than it.
	until time.Time
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

// learnerStallTimeout is how long a learner may make no progress (its
// raft applied index does not advance, counted from its Pod's creation
// or the last advance the operator noted) before it is removed: a learner
// that never starts (a bad image, an unschedulable Pod) or stops catching
// up blocks every other membership change. A learner that advances is
// never removed, however long it takes (a large snapshot). The bound is
// spec.unhealthyMemberTimeout when that is longer.
const learnerStallTimeout = 5 * time.Minute

// learnerNoteInterval is how often, at most, the operator notes a
// learner's advance on its Pod: each note is a write (and a pass), and a
// note up to this old still says the learner moved within the stall
// timeout, which is much longer.
const learnerNoteInterval = 30 * time.Second

// plan decides the next step towards spec.replicas members from what the
// pass observed. It is pure: one change of membership at a time, Pods
// following etcd's member list, every step safe to repeat after a crash,
// and every safety rule checked here so a refusal shows in the status.
func plan(o observed) action {
	c := o.cluster
	want := int(c.DesiredReplicas())
	if c.Recovering() {
		return planRecovery(o)
	}
	if o.members == nil {
		return planWithoutEtcd(o)
	}
	if eps := mismatchedEndpoints(o); len(eps) > 0 {
		return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonClusterIDMismatch,
			reason: "members answer for different etcd clusters (" + strings.Join(eps, ", ") + "): the operator changes nothing until a person decides which members belong to this cluster"}
	}
	if a, refused := checkVersions(o); refused {
		return a
	}
	byName := map[string]etcd.Member{}
	for _, m := range o.members {
		byName[memberName(c, m)] = m
	}
	o.healthy = goingDown(o, byName)
	voters, learners := split(o.members)

	// Once the cluster has formed, no member may found a new one: a seed
	// whose data is wiped later would come back as a cluster of its own,
	// with the same member and cluster IDs. Any value but "existing" (a
	// user's edit, a removed annotation: etcd's default is "new") is
	// sealed again.
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if m, ok := byName[name]; ok && m.Name != "" && p.DeletionTimestamp == nil &&
			p.Annotations[etcdv1alpha1.AnnotationInitialClusterState] != builder.ClusterStateExisting {
			return action{kind: actSealSeed, member: name, reason: "the cluster has formed: its founder " + name + " restarts as a member of it from now on"}
		}
	}
	if stale := staleInitialCluster(o, byName); len(stale) > 0 {
		return action{kind: actSetPeers, member: stale[0], stale: stale, initialCluster: initialCluster(c, o.members),
			reason: "the members changed since the Pods of " + strings.Join(stale, ", ") + " were created: should a member's data be lost, it rejoins the members there are now"}
	}

	// A Pod that stopped for good (evicted, say) goes; its member is then
	// judged like one whose Pod was deleted.
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		if p := o.pods[name]; p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
			return action{kind: actDeletePod, member: name, reason: fmt.Sprintf("Pod %s has stopped for good (%s)", name, p.Status.Phase)}
		}
	}

	// Pods follow the member list: a member without a Pod gets one when it
	// can come back as itself (it never started, or its claim holds its
	// data); otherwise its data is gone and it is replaced below.
	var dataGone []etcd.Member
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if _, ok := o.pods[name]; ok {
			continue
		}
		m := byName[name]
		switch _, gone := memberDataGone(c, m, o.pods, o.claims); {
		case !gone:
			return action{kind: actCreatePod, member: name, id: m.ID, started: m.Name != "", initialCluster: initialCluster(c, o.members),
				reason: "member " + name + " has no Pod"}
		case o.healthy[m.ID]:
			// It answers: its Pod exists and this pass's view of Pods lags.
			return action{kind: actWait, reason: "member " + name + " answers but its Pod is not seen yet"}
		default:
			dataGone = append(dataGone, m)
		}
	}
	// A Pod without a member goes (a crash between removing the member and
	// deleting its Pod), but only when every other Pod that can answer
	// answered for this cluster: a member list from the wrong members must
	// never cost data. On a lost node it is deleted at once, or it would
	// stay Terminating. While one waits for confirmation, the steps below
	// that mend membership go on (a lost zone must not stop the
	// replacement of its other members); scaling down and rolling wait.
	var strayWait *action
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		lost := o.lostNodes[p.Spec.NodeName]
		if _, ok := byName[name]; ok || (p.DeletionTimestamp != nil && !lost) {
			continue
		}
		if silent := unconfirmed(o, name); len(silent) > 0 {
			if strayWait == nil {
				strayWait = &action{kind: actWait, member: name, reason: fmt.Sprintf("Pod %s is not an etcd member, but %s did not confirm the member list yet", name, strings.Join(silent, ", "))}
			}
			continue
		}
		if lost {
			return action{kind: actDeletePod, member: name, force: true, reason: fmt.Sprintf("Pod %s is not an etcd member and its node %s is lost", name, p.Spec.NodeName)}
		}
		return action{kind: actDeletePod, member: name, reason: "Pod " + name + " is not an etcd member"}
	}

	if len(learners) > 0 {
		l := learners[0]
		name := memberName(c, l)
		if len(voters) >= want && !surging(o, voters) {
			return action{kind: actRemove, member: name, id: l.ID, reason: "learner " + name + " is not needed any more"}
		}
		// A learner is judged by its progress, not by the clock: its Pod
		// is never Ready (etcd's /readyz fails on a learner), and catching
		// up from a large snapshot may take longer than any fixed bound.
		if last, now, ok := learnerProgressOf(o, name); ok {
			timeout := max(learnerStallTimeout, c.UnhealthyMemberTimeout())
			switch {
			case now.Index > last.Index && o.now.Sub(last.At) >= learnerNoteInterval:
				return action{kind: actNoteIndex, member: name, progress: now,
					reason: fmt.Sprintf("learner %s is catching up: raft applied index %d, up from %d", name, now.Index, last.Index)}
			case now.Index <= last.Index && o.now.Sub(last.At) > timeout:
				return action{kind: actRemove, member: name, id: l.ID, reason: fmt.Sprintf("learner %s has made no progress since %s (raft applied index %d), longer than %s; a new member takes its place",
					name, last.At.UTC().Format(time.RFC3339), last.Index, timeout)}
			}
		}
		return action{kind: actPromote, member: name, id: l.ID, reason: "learner " + name + " waits to be promoted"}
	}
	if len(dataGone) > 0 {
		m := dataGone[0]
		name := memberName(c, m)
		if err := etcd.CanRemove(o.members, o.healthy, m.ID); err != nil {
			return action{kind: actBlocked, member: name, reason: "cannot replace " + name + ", whose data is gone: " + err.Error()}
		}
		return action{kind: actRemove, member: name, id: m.ID, reason: "the data of member " + name + " is gone with its Pod or claim; a new member replaces it"}
	}
	m, since, unhealthy := unhealthyVoter(o, voters)
	if due := since.Add(c.UnhealthyMemberTimeout()); unhealthy && o.now.After(due) {
		name := memberName(c, m)
		if err := etcd.CanRemove(o.members, o.healthy, m.ID); err != nil {
			return action{kind: actBlocked, member: name, reason: "cannot replace " + name + ", unhealthy since " + since.UTC().Format(time.RFC3339) + ": " + err.Error()}
		}
		return action{kind: actRemove, member: name, id: m.ID, reason: fmt.Sprintf("member %s has been unhealthy since %s, longer than spec.unhealthyMemberTimeout (%s); a new member replaces it",
			name, since.UTC().Format(time.RFC3339), c.UnhealthyMemberTimeout())}
	}
	switch {
	case len(voters) < want:
		name := nextMemberName(c, o)
		if err := etcd.CanAdd(o.members, o.healthy); err != nil {
			return action{kind: actBlocked, member: name, reason: "cannot add " + name + ": " + err.Error()}
		}
		return action{kind: actAddLearner, member: name, reason: fmt.Sprintf("%d of %d members", len(voters), want)}
	case strayWait != nil:
		// Scaling down and rolling wait; the mending above did not.
		return *strayWait
	case len(voters) > want:
		victim, ok := etcd.RemovalCandidate(removable(o, voters), o.healthy, o.leader, func(a, b etcd.Member) int {
			return ordinal(c, memberName(c, a)) - ordinal(c, memberName(c, b))
		})
		if !ok {
			return action{kind: actWait, reason: "no member to remove"}
		}
		name := memberName(c, victim.Member)
		if o.healthy[victim.Member.ID] {
			// Removing a healthy member takes capacity away: the others
			// serve first, or clients of the client Service (which routes
			// to Ready Pods) would find no member.
			if other, ok := unreadyVoter(o, voters, victim.Member.ID); ok {
				return action{kind: actWait, member: other, reason: fmt.Sprintf("removing %s waits for the Pod of %s to be Ready", name, other)}
			}
		}
		if victim.MoveLeaderFirst {
			return action{kind: actMoveLeader, member: name, id: victim.Member.ID, reason: "the leader is leaving"}
		}
		if err := etcd.CanRemove(o.members, o.healthy, victim.Member.ID); err != nil {
			return action{kind: actBlocked, member: name, reason: "cannot remove " + name + ": " + err.Error()}
		}
		why := string(victim.Reason)
		if slices.Contains(outdatedPods(o), name) {
			why = "outdated"
		}
		return action{kind: actRemove, member: name, id: victim.Member.ID,
			reason: fmt.Sprintf("%d members for %d replicas (%s)", len(voters), want, why)}
	}
	if a, ok := planRoll(o, voters); ok {
		return a
	}
	if unhealthy {
		// Nothing else prompts a pass when the timeout runs out.
		due := since.Add(c.UnhealthyMemberTimeout())
		return action{kind: actWait, member: memberName(c, m), until: due, reason: fmt.Sprintf("member %s has been unhealthy since %s; it is replaced at %s unless it recovers",
			memberName(c, m), since.UTC().Format(time.RFC3339), due.UTC().Format(time.RFC3339))}
	}
	return action{kind: actNone}
}

// goingDown is o.healthy with the members whose Pods are being deleted
// counted as unhealthy: they answer now, but are about to stop (and, on
// an emptyDir, to lose their data), so no step may count on them. (A
// scale-down once removed a healthy member while another's Pod was
// terminating, and the cluster lost its quorum for good.)
func goingDown(o observed, byName map[string]etcd.Member) map[uint64]bool {
	healthy := maps.Clone(o.healthy)
	for name, p := range o.pods {
		if m, ok := byName[name]; ok && p.DeletionTimestamp != nil {
			healthy[m.ID] = false
		}
	}
	return healthy
}

// checkVersions refuses every change when the image's etcd version cannot
// replace a version a member runs (etcd says what it runs; the image of
// its Pod may not): a Pod created from the spec, for a new member or a
// roll, would run it. An image whose tag names no version is not checked.
func checkVersions(o observed) (action, bool) {
	image := builder.EtcdImage(o.cluster)
	target, ok := etcdversion.OfImage(image)
	if !ok {
		return action{}, false
	}
	for _, name := range slices.Sorted(maps.Keys(o.versions)) {
		running, ok := etcdversion.Parse(o.versions[name])
		if !ok {
			continue
		}
		if err := etcdversion.CheckUpgrade(running, target); err != nil {
			return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonUpgradeRefused, member: name, reason: fmt.Sprintf(
				"spec asks for %s, but member %s runs etcd %s: %v. Nothing changes until the image is one etcd supports after %s", image, name, running, err, running)}, true
		}
	}
	return action{}, false
}

// outdatedPods lists, by name, the Pods not being deleted that were built
// from an older spec or started with an older trust bundle.
func outdatedPods(o observed) []string {
	specHash := builder.PodSpecHash(o.cluster)
	var outdated []string
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		if p := o.pods[name]; p.DeletionTimestamp == nil && o.outdated(p, specHash) {
			outdated = append(outdated, name)
		}
	}
	return outdated
}

// rollsBySurge tells whether a roll replaces a member by first adding a
// new one (a learner, then promoted) and only then removing the old one,
// rather than restarting the member in place from its claim. An emptyDir
// member cannot restart in place: its data goes with its Pod, so rolling
// it is a replacement. A member with a claim restarts in place only when
// the other voters keep a quorum while it is down; with one or two voters
// they do not.
func rollsBySurge(c *etcdv1alpha1.EtcdCluster, voters int) bool {
	return !c.Spec.Storage.UsesPersistentStorage() || voters-1 < etcdv1alpha1.Quorum(voters)
}

// surging tells whether the cluster has the members spec.replicas asks
// for but rolls by surge and has outdated voters left: it then needs one
// member more than spec.replicas until an outdated one is removed.
func surging(o observed, voters []etcd.Member) bool {
	if len(voters) != int(o.cluster.DesiredReplicas()) || !rollsBySurge(o.cluster, len(voters)) {
		return false
	}
	for _, name := range outdatedPods(o) {
		if slices.ContainsFunc(voters, func(m etcd.Member) bool { return memberName(o.cluster, m) == name }) {
			return true
		}
	}
	return false
}

// removable are the voters a scale-down (or the end of a surge) may
// remove: the outdated ones when there are any, so that a member built
// from the current spec is never removed in place of an outdated one
// (among them a sick one goes first: RemovalCandidate); else all of them.
//
// A voter of the current spec that does not answer is not removed here
// even though it looks sick: it is most often the member a surge has just
// promoted, which serves its client port only once etcd has published its
// name (etcd retries that after 7 s when the first try is lost). Taken
// for the sick member that goes first, it was removed and added again, up
// to five times in one roll (TestRollBySurge). One that stays sick is
// replaced after spec.unhealthyMemberTimeout like any other voter, and
// until then the removal waits for its Pod to be Ready (unreadyVoter).
func removable(o observed, voters []etcd.Member) []etcd.Member {
	outdated := outdatedPods(o)
	old := slices.DeleteFunc(slices.Clone(voters), func(m etcd.Member) bool {
		return !slices.Contains(outdated, memberName(o.cluster, m))
	})
	if len(old) == 0 {
		return voters
	}
	return old
}

// planRoll rolls one member whose Pod was built from an older spec or
// started with an older trust bundle, only when membership matches the
// spec, every voter answers and every Pod is Ready. By surge (see
// rollsBySurge) it adds the member that replaces an outdated one; the
// outdated one is then removed as a member too many, the leader last.
// In place it deletes a follower's Pod, by name, the leader's last after
// moving its leadership away; the member comes back from its claim.
func planRoll(o observed, voters []etcd.Member) (action, bool) {
	c := o.cluster
	outdated := outdatedPods(o)
	if len(outdated) == 0 {
		return action{}, false
	}
	progress := fmt.Sprintf("%d of %d members up to date", len(o.pods)-len(outdated), len(o.pods))
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		// A member's Pod rolled in place must be gone before it is built
		// again; the Pod of a member a surge removed holds nothing up.
		if o.pods[name].DeletionTimestamp != nil && slices.ContainsFunc(voters, func(m etcd.Member) bool { return memberName(c, m) == name }) {
			return action{kind: actWait, member: name, reason: fmt.Sprintf("rolling waits for Pod %s to finish terminating (%s)", name, progress)}, true
		}
	}
	for _, m := range voters {
		name := memberName(c, m)
		if p, ok := o.pods[name]; !o.healthy[m.ID] || !ok || !podReady(p) {
			return action{kind: actWait, member: name, reason: fmt.Sprintf("rolling waits for every member to be healthy and Ready (%s is not; %s)", name, progress)}, true
		}
	}
	if rollsBySurge(c, len(voters)) {
		name := nextMemberName(c, o)
		if err := etcd.CanAdd(o.members, o.healthy); err != nil {
			return action{kind: actBlocked, member: name, reason: "cannot add " + name + " to replace an outdated member: " + err.Error()}, true
		}
		return action{kind: actAddLearner, member: name, reason: fmt.Sprintf("rolling by surge: %s joins before an outdated member leaves (%s)", name, progress)}, true
	}
	leader := ""
	for _, m := range voters {
		if m.ID == o.leader {
			leader = memberName(c, m)
		}
	}
	next := outdated[0]
	if next == leader && len(outdated) > 1 {
		next = outdated[1]
	}
	if next == leader && len(voters) > 1 {
		return action{kind: actMoveLeader, member: next, id: o.leader, reason: "the leader is rolled last: moving leadership away first (" + progress + ")"}, true
	}
	return action{kind: actRoll, member: next, reason: fmt.Sprintf("rolling %s to the current spec (%s)", next, progress)}, true
}

// unreadyVoter names a voter other than except whose Pod is missing or
// not Ready, false when there is none.
func unreadyVoter(o observed, voters []etcd.Member, except uint64) (string, bool) {
	for _, m := range voters {
		name := memberName(o.cluster, m)
		if p, ok := o.pods[name]; m.ID != except && (!ok || !podReady(p)) {
			return name, true
		}
	}
	return "", false
}

// leaderSuccessor is the voter leadership moves to from the member from:
// a healthy voter built from the current spec when there is one (so that
// a roll does not move leadership twice), else any healthy voter; false
// when there is none.
func leaderSuccessor(o observed, from uint64) (etcd.Member, bool) {
	voters, _ := split(o.members)
	outdated := outdatedPods(o)
	var fallback *etcd.Member
	for i, v := range voters {
		if p, ok := o.pods[memberName(o.cluster, v)]; v.ID == from || !o.healthy[v.ID] || !ok || !podReady(p) {
			continue
		}
		if !slices.Contains(outdated, memberName(o.cluster, v)) {
			return v, true
		}
		if fallback == nil {
			fallback = &voters[i]
		}
	}
	if fallback == nil {
		return etcd.Member{}, false
	}
	return *fallback, true
}

// unconfirmed lists the Pods other than except whose member did not report
// the member list's cluster ID in this pass, leaving out the Pods on lost
// nodes: they cannot answer, and their members are judged by the others.
func unconfirmed(o observed, except string) []string {
	var silent []string
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		if name == except || o.lostNodes[o.pods[name].Spec.NodeName] {
			continue
		}
		if id, ok := o.clusterIDs[builder.ClientURL(o.cluster, name)]; !ok || id != o.clusterID {
			silent = append(silent, name)
		}
	}
	return silent
}

// unhealthyVoter finds the voter that did not answer this pass and whose
// Pod has not been Ready for the longest time, and since when. One that
// stays so for spec.unhealthyMemberTimeout is replaced: its data was wiped
// under it, or its node will not return.
func unhealthyVoter(o observed, voters []etcd.Member) (etcd.Member, time.Time, bool) {
	var found etcd.Member
	var earliest time.Time
	for _, m := range voters {
		p, ok := o.pods[memberName(o.cluster, m)]
		if !ok || o.healthy[m.ID] || defragmenting(p, o.cluster.DefragmentBudget(), o.now) {
			continue
		}
		if since := notReadySince(p); !since.IsZero() && (earliest.IsZero() || since.Before(earliest)) {
			found, earliest = m, since
		}
	}
	return found, earliest, !earliest.IsZero()
}

// defragmenting tells whether the operator began to defragment the
// member of Pod p less than budget before now: it serves nothing until
// done, and is not unhealthy for that.
func defragmenting(p *corev1.Pod, budget time.Duration, now time.Time) bool {
	since, err := time.Parse(time.RFC3339, p.Annotations[etcdv1alpha1.AnnotationDefragmenting])
	return err == nil && now.Sub(since) < budget
}

// notReadySince is when a Pod stopped being Ready (its creation when it
// never reported), or zero while it is Ready.
func notReadySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return time.Time{}
			}
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

// learnerProgress is a learner's raft applied index and when the
// operator first saw it there.
type learnerProgress struct {
	Index uint64
	At    time.Time
}

// String is the progress as the annotation holds it: "INDEX@RFC3339".
func (p learnerProgress) String() string {
	return strconv.FormatUint(p.Index, 10) + "@" + p.At.UTC().Format(time.RFC3339)
}

// parseLearnerProgress reads the annotation's value.
func parseLearnerProgress(s string) (learnerProgress, bool) {
	index, at, ok := strings.Cut(s, "@")
	i, err := strconv.ParseUint(index, 10, 64)
	t, err2 := time.Parse(time.RFC3339, at)
	if !ok || err != nil || err2 != nil {
		return learnerProgress{}, false
	}
	return learnerProgress{Index: i, At: t}, true
}

// learnerProgressOf is what the API holds of a learner's progress (the
// index noted on its Pod, or index 0 at the Pod's creation when none is
// noted or the note does not parse) and what this pass sees (its applied
// index now, or no advance when it did not answer). Without a Pod there
// is nothing to judge by: ok is false. Everything comes from the API and
// etcd, so a restarted operator judges the same way.
func learnerProgressOf(o observed, name string) (last, now learnerProgress, ok bool) {
	p, ok := o.pods[name]
	if !ok {
		return last, now, false
	}
	last = learnerProgress{At: p.CreationTimestamp.Time}
	if noted, ok := parseLearnerProgress(p.Annotations[etcdv1alpha1.AnnotationLearnerProgress]); ok {
		last = noted
	}
	now = learnerProgress{Index: last.Index, At: o.now}
	if i, answered := o.appliedIndexes[name]; answered && i > last.Index {
		now.Index = i
	}
	return last, now, true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// planWithoutEtcd decides what to do when no member answers: found the
// cluster while it is being founded (founding), else bring back members
// whose claims survived their Pods (a quorum may need them to answer
// again), or wait for the members to come up.
func planWithoutEtcd(o observed) action {
	c := o.cluster
	if a, ok := planRecoveryApproval(o); ok {
		return a
	}
	if lost := c.Status.ClusterID; lost != "" && len(o.pods) == 0 && len(o.allClaims) == 0 && c.Annotations[etcdv1alpha1.AnnotationStartEmpty] != lost {
		return action{kind: actRefuse, refusal: etcdv1alpha1.ReasonDataLost, reason: fmt.Sprintf(
			"every member of etcd cluster %s is gone with its data (no Pods, no claims); the operator does not put an empty cluster in its place on its own. Restore from a backup into a new EtcdCluster, or annotate this one with %s=%s to start an empty cluster",
			lost, etcdv1alpha1.AnnotationStartEmpty, lost)}
	}
	if founding(o) {
		// Only a cluster that never formed restores: one started empty in
		// the place of a lost one (AnnotationStartEmpty) does not.
		if c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil && c.Status.ClusterID == "" && o.restore == nil {
			if p := o.restoreProblem; p != nil {
				return action{kind: actRefuse, refusal: p.reason, reason: p.message}
			}
			return action{kind: actWait, reason: "the backup to restore is being read"}
		}
		initial := foundingCluster(o)
		var missing []string
		for _, name := range builder.InitialClusterNames(initial) {
			if _, ok := o.pods[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 && o.restore != nil {
			return action{kind: actCreateSeed, member: missing[0], founders: missing, initialCluster: initial, restore: o.restore,
				reason: "the cluster has not formed yet: its seed restores the snapshot of EtcdBackup " + o.restore.Name + " (" + o.restore.Status.Location + "); the other members join it"}
		}
		if len(missing) > 0 {
			return action{kind: actCreateSeed, member: missing[0], founders: missing, initialCluster: initial,
				reason: "the cluster has not formed yet: its founders start together (" + initial + ")"}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.claims)) {
		if _, ok := o.pods[name]; !ok {
			peers := map[string]string{}
			for n := range o.claims {
				peers[n] = builder.PeerURL(c, n)
			}
			return action{kind: actCreatePod, member: name, started: true, initialCluster: builder.InitialCluster(peers),
				reason: "no member answers and the claim of " + name + " holds its data"}
		}
	}
	return action{kind: actWait, reason: fmt.Sprintf("no member answers yet (%v)", o.etcdErr)}
}

// founding tells whether the cluster is being founded, its founders
// starting together as a new etcd cluster: it never formed (no cluster ID
// recorded; a claim is no evidence of member data until a member started
// on it), or every member is gone and the user accepted an empty cluster
// in its place (AnnotationStartEmpty), as long as every Pod is one of the
// new founders.
func founding(o observed) bool {
	c := o.cluster
	if lost := c.Status.ClusterID; lost != "" {
		if c.Annotations[etcdv1alpha1.AnnotationStartEmpty] != lost {
			return false
		}
		for _, p := range o.pods {
			if p.Annotations[etcdv1alpha1.AnnotationInitialClusterState] != builder.ClusterStateNew {
				return false
			}
		}
	}
	return true
}

// foundingCluster is the --initial-cluster of the founders: the one the
// first founder Pods were built with, so that a change of spec.replicas
// while they start cannot give founders two different clusters (etcd
// derives the cluster ID from it); else spec.replicas members. A cluster
// grows past its founders, or shrinks, once it has formed.
func foundingCluster(o observed) string {
	c := o.cluster
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if p.Annotations[etcdv1alpha1.AnnotationInitialClusterState] == builder.ClusterStateNew {
			if initial := builder.InitialClusterOf(p); initial != "" {
				return initial
			}
		}
	}
	// A restored cluster is founded by its seed alone: only one member
	// may restore the snapshot, the others join it as learners.
	founders := int(c.DesiredReplicas())
	if o.restore != nil {
		founders = 1
	}
	peers := map[string]string{}
	for i := range founders {
		name := fmt.Sprintf("%s-%d", c.Name, i)
		peers[name] = builder.PeerURL(c, name)
	}
	return builder.InitialCluster(peers)
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
	for name := range o.allClaims {
		highest = max(highest, ordinal(c, name))
	}
	for _, m := range o.members {
		highest = max(highest, ordinal(c, memberName(c, m)))
	}
	return fmt.Sprintf("%s-%d", c.Name, highest+1)
}

// staleInitialCluster lists the Pods of members (started or not) that
// join as members of the cluster and whose --initial-cluster is not the
// member list: etcd ignores it while the member has its data, but one
// whose data is lost under its running Pod restarts from it, and etcd
// refuses to start a member whose --initial-cluster does not name exactly
// the members there are (after a roll, none of the ones its Pod was
// created with). A founder still to found the cluster keeps the founders.
func staleInitialCluster(o observed, byName map[string]etcd.Member) []string {
	want := initialCluster(o.cluster, o.members)
	var stale []string
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if _, ok := byName[name]; ok && p.DeletionTimestamp == nil &&
			p.Annotations[etcdv1alpha1.AnnotationInitialClusterState] == builder.ClusterStateExisting &&
			builder.InitialClusterOf(p) != want {
			stale = append(stale, name)
		}
	}
	return stale
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

// certificatesWait turns a step that leads to the creation of a member Pod
// (creating it; adding the member it is created for; rolling a member in
// place, whose Pod is deleted to be created again) into a wait while the
// cluster's certificates are not ready (as the PKI reconciler reports in
// CertificatesReady) or its trust bundle does not exist: the Pod could not
// start without its Secrets, a Pod waiting on a missing Secret says
// nothing in the cluster's status, and a member rolled meanwhile would
// stay down until they are ready.
func certificatesWait(o observed, a action) action {
	c := o.cluster
	if !slices.Contains([]actionKind{actCreateSeed, actCreateRecoverySeed, actCreatePod, actAddLearner, actRoll}, a.kind) || !c.Spec.Security.TLSEnabled() {
		return a
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionCertificatesReady)
	if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == c.Generation && o.trustHash != "" {
		return a
	}
	why := "the PKI reconciler has not checked them yet"
	switch {
	case cond != nil && cond.Status == metav1.ConditionFalse:
		why = cond.Message
	case cond != nil && cond.Status == metav1.ConditionTrue:
		why = "the trust bundle Secret " + builder.TrustBundleSecretName(c) + " does not exist yet"
	}
	return action{kind: actWait, member: a.member, reason: "waiting for the certificates before creating the member's Pod: " + why}
}
