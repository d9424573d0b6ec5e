package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// healthReport is what the health reconciler publishes about a cluster.
type healthReport struct {
	members    []etcdv1alpha1.MemberStatus
	conditions []metav1.Condition
	// quorum tells whether a quorum of voters answered.
	quorum bool
	// recoveryPlan is, when the quorum is lost for good, how the cluster
	// could be rebuilt from a survivor.
	recoveryPlan *etcdv1alpha1.RecoveryPlan
}

// assess turns a probe into the members' status and the health
// conditions, each set by its own function. Members that did not answer
// say why; when no member answers at all, the report says so and lists no
// member as healthy.
//
// lost is, when no member gives the member list, what the members that
// answer tell about the quorum; nil otherwise.
func assess(c *etcdv1alpha1.EtcdCluster, p probe, lost *quorumLoss, now time.Time) healthReport {
	voters, healthy := voterCounts(p)
	var plan *etcdv1alpha1.RecoveryPlan
	if lost != nil {
		plan = lost.recoveryPlan(c)
	}
	return healthReport{
		recoveryPlan: plan,
		members:      keepProbeTimes(c.Status.Members, memberStatuses(c, p, now), now),
		conditions: []metav1.Condition{
			quorumCondition(c, p, lost),
			degradedCondition(c, p),
			alarmCondition(c, p),
		},
		quorum: p.members != nil && healthy >= etcdv1alpha1.Quorum(voters),
	}
}

// unreachable is the message of every health condition when no member
// answers.
func unreachable(p probe) string { return fmt.Sprintf("No member answers: %v", p.err) }

// probeTimeHeartbeat is how old a member's lastProbeTime may grow while
// nothing else in its status changes. A status write at every probe (10 s)
// of every cluster was the operator's main cost at rest; as the kubelet
// reports an unchanged node status only every five minutes
// (nodeStatusReportFrequency), a probe that finds nothing new writes
// nothing until this much time has passed. At one minute, the writes and
// the watch events they cause were still a third of the CPU of an operator
// with 100 clusters at rest (make bench --cpu-profile).
const probeTimeHeartbeat = 5 * time.Minute

// keepProbeTimes gives each member of now (this probe's statuses) its
// lastProbeTime of was (the status written before) when nothing else of
// it changed and that time is less than probeTimeHeartbeat old, so that
// the status, unchanged, is not written again.
func keepProbeTimes(was, now []etcdv1alpha1.MemberStatus, at time.Time) []etcdv1alpha1.MemberStatus {
	prev := map[string]etcdv1alpha1.MemberStatus{}
	for _, m := range was {
		prev[m.Name] = m
	}
	for i, m := range now {
		old, ok := prev[m.Name]
		if !ok || old.LastProbeTime == nil || at.Sub(old.LastProbeTime.Time) >= probeTimeHeartbeat {
			continue
		}
		m.LastProbeTime = old.LastProbeTime
		if equality.Semantic.DeepEqual(m, old) {
			now[i] = m
		}
	}
	return now
}

// memberStatuses is the status of each member, sorted by name. When no
// quorum gives the member list, the members of the last status stay
// listed as unreachable: of the last good probe, only who they are and
// their raft progress are kept (a member of the cluster that still
// answers gives its own), so that the highest raft index the cluster
// reached is known when its quorum is lost for good.
func memberStatuses(c *etcdv1alpha1.EtcdCluster, p probe, now time.Time) []etcdv1alpha1.MemberStatus {
	probed := metav1.NewTime(now)
	if p.members == nil {
		answered := map[string]etcd.Status{}
		for _, st := range p.statuses {
			if ofCluster(c, st.ClusterID) {
				answered[etcd.FormatID(st.MemberID)] = st
			}
		}
		var out []etcdv1alpha1.MemberStatus
		for _, was := range c.Status.Members {
			ms := etcdv1alpha1.MemberStatus{
				Name: was.Name, ID: was.ID, PeerURLs: was.PeerURLs, ClientURLs: was.ClientURLs,
				RaftTerm: was.RaftTerm, RaftIndex: was.RaftIndex,
				LastError: unreachable(p), LastProbeTime: &probed,
			}
			if st, ok := answered[was.ID]; ok {
				ms.RaftTerm, ms.RaftIndex = st.RaftTerm, st.RaftIndex
			}
			out = append(out, ms)
		}
		return out
	}
	statusOf := map[uint64]etcd.Status{}
	for _, st := range p.statuses {
		statusOf[st.MemberID] = st
	}
	alarmsOf := map[uint64][]string{}
	for _, a := range p.alarms {
		alarmsOf[a.MemberID] = append(alarmsOf[a.MemberID], a.Type)
	}
	var out []etcdv1alpha1.MemberStatus
	for _, m := range p.members {
		ms := etcdv1alpha1.MemberStatus{
			Name: memberName(c, m), ID: etcd.FormatID(m.ID), Role: role(m, p.leader), Healthy: memberAnswers(p, m),
			PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, LastProbeTime: &probed, LastError: memberError(p, m),
		}
		if st, answered := statusOf[m.ID]; answered {
			ms.Version, ms.DBSize, ms.DBSizeInUse, ms.RaftTerm, ms.RaftIndex = st.Version, st.DBSize, st.DBSizeInUse, st.RaftTerm, st.RaftIndex
		}
		if as := alarmsOf[m.ID]; len(as) > 0 {
			ms.Alarms = slices.Sorted(slices.Values(as))
		}
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b etcdv1alpha1.MemberStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// memberAnswers tells whether a member answered the health check.
func memberAnswers(p probe, m etcd.Member) bool {
	err, checked := p.health[m.ID]
	return checked && err == nil
}

// memberError is why a member is not healthy; "" when it is.
func memberError(p probe, m etcd.Member) string {
	err, checked := p.health[m.ID]
	switch {
	case !checked:
		return "the member has not started yet"
	case err != nil:
		return err.Error()
	}
	return ""
}

// voterCounts counts the voting members and those of them that are
// healthy.
func voterCounts(p probe) (voters, healthy int) {
	for _, m := range p.members {
		if m.IsLearner {
			continue
		}
		voters++
		if memberAnswers(p, m) {
			healthy++
		}
	}
	return voters, healthy
}

// healthCondition is a health condition of c, True when ok.
func healthCondition(c *etcdv1alpha1.EtcdCluster, typ string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation}
}

// quorumCondition tells whether a quorum of voters answers linearizable
// reads, and, when none does, whether one can come back (lost is what the
// members that answer tell).
func quorumCondition(c *etcdv1alpha1.EtcdCluster, p probe, lost *quorumLoss) metav1.Condition {
	switch {
	case lost != nil && lost.forGood:
		return healthCondition(c, etcdv1alpha1.ConditionQuorumAvailable, false, etcdv1alpha1.ReasonQuorumLostForGood, lost.message(c))
	case lost != nil:
		return healthCondition(c, etcdv1alpha1.ConditionQuorumAvailable, false, etcdv1alpha1.ReasonQuorumLost, lost.message(c))
	}
	if p.members == nil {
		return healthCondition(c, etcdv1alpha1.ConditionQuorumAvailable, false, etcdv1alpha1.ReasonUnreachable, unreachable(p))
	}
	voters, healthy := voterCounts(p)
	msg := fmt.Sprintf("%d of %d voting members answer linearizable reads; %d needed", healthy, voters, etcdv1alpha1.Quorum(voters))
	if healthy >= etcdv1alpha1.Quorum(voters) {
		return healthCondition(c, etcdv1alpha1.ConditionQuorumAvailable, true, etcdv1alpha1.ReasonQuorumHealthy, msg)
	}
	return healthCondition(c, etcdv1alpha1.ConditionQuorumAvailable, false, etcdv1alpha1.ReasonQuorumLost, msg)
}

// degradedCondition names the members that answer for another etcd
// cluster or do not answer at all; members not started yet are not sick.
func degradedCondition(c *etcdv1alpha1.EtcdCluster, p probe) metav1.Condition {
	if p.members == nil {
		return healthCondition(c, etcdv1alpha1.ConditionDegraded, true, etcdv1alpha1.ReasonUnreachable, unreachable(p))
	}
	if ids := foreignEndpoints(p); len(ids) > 0 {
		return healthCondition(c, etcdv1alpha1.ConditionDegraded, true, etcdv1alpha1.ReasonClusterIDMismatch, "Members answer for different etcd clusters: "+strings.Join(ids, "; "))
	}
	var sick []string
	for _, m := range p.members {
		if !memberAnswers(p, m) && m.Name != "" {
			sick = append(sick, memberName(c, m)+": "+memberError(p, m))
		}
	}
	if len(sick) > 0 {
		slices.Sort(sick)
		return healthCondition(c, etcdv1alpha1.ConditionDegraded, true, etcdv1alpha1.ReasonMembersUnhealthy, "Unhealthy: "+strings.Join(sick, "; "))
	}
	return healthCondition(c, etcdv1alpha1.ConditionDegraded, false, etcdv1alpha1.ReasonAllMembersHealthy, fmt.Sprintf("All %d members answer", len(p.members)))
}

func role(m etcd.Member, leader uint64) etcdv1alpha1.MemberRole {
	switch {
	case m.IsLearner:
		return etcdv1alpha1.MemberRoleLearner
	case m.ID == leader:
		return etcdv1alpha1.MemberRoleLeader
	}
	return etcdv1alpha1.MemberRoleFollower
}

// foreignEndpoints lists the endpoints whose cluster ID is not the member
// list's.
func foreignEndpoints(p probe) []string {
	var out []string
	for _, ep := range slices.Sorted(maps.Keys(p.statuses)) {
		if id := p.statuses[ep].ClusterID; id != p.clusterID {
			out = append(out, fmt.Sprintf("%s reports cluster %s, not %s", ep, etcd.FormatID(id), etcd.FormatID(p.clusterID)))
		}
	}
	return out
}

// alarmCondition reports the active alarms, by member; the reason is the
// alarm types, such as NOSPACE or CORRUPT_NOSPACE.
func alarmCondition(c *etcdv1alpha1.EtcdCluster, p probe) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionAlarm, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonNoAlarms, Message: "No member raised an alarm", ObservedGeneration: c.Generation}
	if p.members == nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, etcdv1alpha1.ReasonUnreachable, unreachable(p)
		return cond
	}
	if p.alarmsErr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, etcdv1alpha1.ReasonAlarmsUnknown, "Listing alarms: "+p.alarmsErr.Error()
		return cond
	}
	if len(p.alarms) == 0 {
		return cond
	}
	names := map[uint64]string{}
	for _, m := range p.members {
		names[m.ID] = memberName(c, m)
	}
	types := map[string]bool{}
	var raised []string
	for _, a := range p.alarms {
		types[a.Type] = true
		who := names[a.MemberID]
		if who == "" {
			who = "member " + etcd.FormatID(a.MemberID)
		}
		raised = append(raised, who+" raised "+a.Type)
	}
	slices.Sort(raised)
	cond.Status, cond.Reason = metav1.ConditionTrue, strings.Join(slices.Sorted(maps.Keys(types)), "_")
	cond.Message = strings.Join(raised, "; ")
	switch {
	case types[etcd.AlarmCorrupt]:
		cond.Message += ". CORRUPT: a member's data differs from the others'; the operator does not disarm it: find the corrupt member (etcdctl check hashkv), replace it, then disarm the alarm"
	case types[etcd.AlarmNoSpace] && !c.DefragmentationEnabled():
		cond.Message += ". NOSPACE: the cluster refuses writes; spec.maintenance.defragmentation is off, so compact, defragment and disarm by hand, or raise quota-backend-bytes"
	case types[etcd.AlarmNoSpace]:
		cond.Message += ". NOSPACE: the cluster refuses writes until the operator has compacted, defragmented and disarmed"
	}
	return cond
}

// maintenanceKind is the one step of upkeep a pass takes.
type maintenanceKind string

const (
	maintNone       maintenanceKind = "None"
	maintWait       maintenanceKind = "Wait"
	maintCompact    maintenanceKind = "Compact"
	maintDefragment maintenanceKind = "Defragment"
	maintDisarm     maintenanceKind = "Disarm"
)

// maintenance is the planned step: a kind, the member, its endpoint, the
// alarm to disarm and why.
type maintenance struct {
	kind     maintenanceKind
	member   string
	endpoint string
	alarm    etcd.Alarm
	reason   string
	// id is the member MoveLeader moves leadership to, from the leader's
	// name.
	id   uint64
	from string
	// edit, for a step that carries out a request, is how its annotations
	// change once the step succeeded; nil for upkeep.
	edit *requestEdit
	// held are the requests that wait, each saying why and how to cancel
	// it.
	held []string
	// compactFirst, under NOSPACE, compacts the key space before the step
	// (nothing when compacted already): etcd's own recovery from NOSPACE
	// is compact, defragment, disarm, and whether the live data passes
	// the compaction threshold depends on how the file grew.
	compactFirst bool
}

// planMaintenance decides the next step of maintenance, re-derived each
// pass from etcd and the annotations, so it resumes after a restart:
// the first request of the annotations that can be carried out
// (health_requests.go), or else a step of upkeep. Requests that wait say
// why in held. While the cluster is paused nothing is done.
func planMaintenance(c *etcdv1alpha1.EtcdCluster, p probe) maintenance {
	if c.IsPaused() {
		return maintenance{kind: maintNone, reason: "paused", held: heldWhile(c, "the cluster is paused")}
	}
	if p.members == nil {
		return maintenance{kind: maintNone, held: heldWhile(c, "no member answers")}
	}
	step, act, held := planRequests(c, p)
	if !act {
		step = planUpkeep(c, p)
	}
	step.held = held
	return step
}

// planUpkeep decides the next step of upkeep from the members' databases
// and the alarms. On NOSPACE: compact while live data seems to fill the
// quota, defragment every member holding free space, one at a time,
// followers first and the leader last, then disarm; each of these steps
// compacts first (compactFirst). Without alarms:
// defragment a member whose free space passes the threshold. Only with
// every member healthy: a member defragmenting does not serve.
func planUpkeep(c *etcdv1alpha1.EtcdCluster, p probe) maintenance {
	if !c.DefragmentationEnabled() {
		return maintenance{kind: maintNone, reason: "spec.maintenance.defragmentation is off"}
	}
	if p.members == nil || p.alarmsErr != nil {
		return maintenance{kind: maintNone}
	}
	var noSpace []etcd.Alarm
	for _, a := range p.alarms {
		if a.Type == etcd.AlarmNoSpace {
			noSpace = append(noSpace, a)
		}
	}
	byID := map[uint64]etcd.Status{}
	for _, st := range p.statuses {
		byID[st.MemberID] = st
	}
	threshold, minSize, quota := int64(c.FragmentationThresholdPercent()), c.MinDefragmentationSize(), c.QuotaBackendBytes()
	// fragmented hold free space past the threshold; crowded, under
	// NOSPACE, have files near the quota with some free space: etcd
	// compares the file, not the live data, with the quota, so a file
	// that still fills it raises the alarm again once disarmed.
	var fragmented, crowded []etcd.Member
	full := ""
	for _, m := range p.members {
		st, ok := byID[m.ID]
		if !ok || st.DBSize == 0 {
			continue
		}
		free := st.DBSize - st.DBSizeInUse
		if free > 0 && free*100 >= threshold*st.DBSize && (st.DBSize >= minSize || len(noSpace) > 0) {
			fragmented = append(fragmented, m)
		}
		if free > 0 && len(noSpace) > 0 && nearQuota(st.DBSize, quota) {
			crowded = append(crowded, m)
		}
		if st.DBSizeInUse*10 >= quota*8 && full == "" {
			full = memberName(c, m)
		}
	}
	if len(noSpace) == 0 && len(fragmented) == 0 {
		return maintenance{kind: maintNone}
	}
	for _, m := range p.members {
		if err, probed := p.health[m.ID]; !probed || err != nil {
			return maintenance{kind: maintWait, member: memberName(c, m), reason: "waiting for every member to be healthy before compacting or defragmenting (" + memberName(c, m) + " is not)"}
		}
	}
	// defragmentFirst is the step defragmenting the first of members,
	// the leader last, for why.
	defragmentFirst := func(members []etcd.Member, why func(name string, st etcd.Status) string) maintenance {
		leaderLast(c, members, p.leader)
		st := byID[members[0].ID]
		name := memberName(c, members[0])
		return maintenance{kind: maintDefragment, member: name, endpoint: st.Endpoint, reason: why(name, st), compactFirst: len(noSpace) > 0}
	}
	if len(fragmented) > 0 {
		return defragmentFirst(fragmented, func(name string, st etcd.Status) string {
			return fmt.Sprintf("%s: %s of its %s database is free", name, sizeOf(st.DBSize-st.DBSizeInUse), sizeOf(st.DBSize))
		})
	}
	if full != "" {
		return maintenance{kind: maintCompact, member: full,
			reason: fmt.Sprintf("NOSPACE: live data of %s is at least 80%% of quota-backend-bytes (%s); compacting drops old revisions (if it frees nothing, delete keys or raise quota-backend-bytes)", full, sizeOf(quota))}
	}
	if len(crowded) > 0 {
		return defragmentFirst(crowded, func(name string, st etcd.Status) string {
			return fmt.Sprintf("NOSPACE: %s's database file (%s) is near quota-backend-bytes (%s) with %s free", name, sizeOf(st.DBSize), sizeOf(quota), sizeOf(st.DBSize-st.DBSizeInUse))
		})
	}
	a := noSpace[0]
	return maintenance{kind: maintDisarm, alarm: a, member: etcd.FormatID(a.MemberID), reason: "NOSPACE: every database has room again", compactFirst: true}
}

// nearQuota tells whether a database file of size is within a tenth of
// the quota: disarmed now, NOSPACE would soon be raised again.
func nearQuota(size, quota int64) bool { return size*10 >= quota*9 }

// sizeOf prints a size the way Kubernetes quantities read.
func sizeOf(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// maintenanceCondition reports the planned upkeep.
func maintenanceCondition(c *etcdv1alpha1.EtcdCluster, m maintenance) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionMaintenance, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonIdle,
		Message: "No database needs compaction or defragmentation", ObservedGeneration: c.Generation}
	switch {
	case c.IsPaused():
		cond.Reason, cond.Message = etcdv1alpha1.ReasonPaused, "The operator neither compacts nor defragments while the annotation "+etcdv1alpha1.AnnotationPaused+" is \"true\""
	case m.kind != maintNone:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, string(m.kind), m.reason
	case len(m.held) > 0:
		cond.Reason, cond.Message = etcdv1alpha1.ReasonRequestHeld, ""
	case !c.DefragmentationEnabled():
		cond.Reason, cond.Message = etcdv1alpha1.ReasonDisabled, "spec.maintenance.defragmentation is off: the operator neither compacts nor defragments"
	}
	return requestMessage(cond, m.held)
}

// memberURLs are the client URLs of the Pods, the endpoints to probe.
func memberURLs(c *etcdv1alpha1.EtcdCluster, pods []string) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, builder.ClientURL(c, p))
	}
	slices.Sort(out)
	return out
}

// healthEvent is an event for a change between two probes.
type healthEvent struct {
	eventType, reason, message string
}

// healthEvents compares the members of the last status with those of the
// new report: a member that became unhealthy or recovered, a new leader,
// an alarm raised or cleared. Members that came or went are the topology
// reconciler's events.
func healthEvents(old, cur []etcdv1alpha1.MemberStatus) []healthEvent {
	var events []healthEvent
	before := map[string]etcdv1alpha1.MemberStatus{}
	oldLeader := ""
	for _, m := range old {
		before[m.Name] = m
		if m.Role == etcdv1alpha1.MemberRoleLeader {
			oldLeader = m.Name
		}
	}
	newLeader := ""
	for _, m := range cur {
		if m.Role == etcdv1alpha1.MemberRoleLeader {
			newLeader = m.Name
		}
		was, ok := before[m.Name]
		if !ok {
			continue
		}
		switch {
		case was.Healthy && !m.Healthy:
			events = append(events, healthEvent{"Warning", "MemberUnhealthy", fmt.Sprintf("Member %s became unhealthy: %s", m.Name, m.LastError)})
		case !was.Healthy && m.Healthy:
			events = append(events, healthEvent{"Normal", "MemberRecovered", fmt.Sprintf("Member %s is healthy again", m.Name)})
		}
		for _, a := range m.Alarms {
			if !slices.Contains(was.Alarms, a) {
				events = append(events, healthEvent{"Warning", "AlarmRaised", fmt.Sprintf("Member %s raised %s", m.Name, a)})
			}
		}
		for _, a := range was.Alarms {
			if !slices.Contains(m.Alarms, a) {
				events = append(events, healthEvent{"Normal", "AlarmCleared", fmt.Sprintf("The %s alarm of member %s is cleared", a, m.Name)})
			}
		}
	}
	if newLeader != "" && oldLeader != "" && newLeader != oldLeader {
		events = append(events, healthEvent{"Normal", "LeaderChanged", fmt.Sprintf("Leadership moved from %s to %s", oldLeader, newLeader)})
	}
	return events
}
