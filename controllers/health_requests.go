package controllers

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// Requests: a person (or kubectl etcd) asks the operator to move etcd's
// leadership or to defragment through annotations on the EtcdCluster
// (etcdv1alpha1.AnnotationMoveLeader, AnnotationDefragment), and the
// health reconciler carries them out as steps of its maintenance, so the
// operator stays the only writer of the cluster's etcd state. Every pass
// re-derives what is left from etcd and the annotations; a step is done
// at least once and doing it again is harmless (the target already leads,
// a member defragmented twice), so a crash between a step and the removal
// of its annotation only repeats the step.

// The steps requests add to the maintenance.
const (
	// maintMoveLeader moves leadership to the member a request names.
	maintMoveLeader maintenanceKind = "MoveLeader"
	// maintRequestDone only removes a request's annotations: what it
	// asked is already so.
	maintRequestDone maintenanceKind = "RequestDone"
)

// requestEdit is how a step changes the request annotations once it has
// succeeded. The patch applies only while the annotation test still has
// the value this pass read: a request changed meanwhile is not lost.
type requestEdit struct {
	test   string
	remove []string
	set    map[string]string
}

// acts tells whether a step does anything.
func (m maintenance) acts() bool {
	switch m.kind {
	case maintCompact, maintDefragment, maintDisarm, maintMoveLeader, maintRequestDone:
		return true
	}
	return false
}

// cancelHint is how to cancel the request of annotation on c.
func cancelHint(c *etcdv1alpha1.EtcdCluster, annotation string) string {
	return fmt.Sprintf("cancel it with: kubectl annotate etcdcluster %s %s-", c.Name, annotation)
}

// heldWhile is the note of every pending request while none can be
// looked at.
func heldWhile(c *etcdv1alpha1.EtcdCluster, why string) []string {
	var out []string
	if to, ok := c.Annotations[etcdv1alpha1.AnnotationMoveLeader]; ok {
		out = append(out, fmt.Sprintf("The request to move leadership to %q waits while %s", to, why))
	}
	if m, ok := c.Annotations[etcdv1alpha1.AnnotationDefragment]; ok {
		out = append(out, fmt.Sprintf("The request to defragment %q waits while %s", m, why))
	}
	return out
}

// requestMember finds the member named name and says why it cannot take
// part in a request yet ("" when it can): it is unknown, has not started,
// is a learner (ifLearner says why that matters) or does not answer.
func requestMember(c *etcdv1alpha1.EtcdCluster, p probe, name, ifLearner string) (etcd.Member, string) {
	var names []string
	for _, m := range p.members {
		n := memberName(c, m)
		names = append(names, n)
		if n != name {
			continue
		}
		err, probed := p.health[m.ID]
		switch {
		case m.Name == "" || len(m.ClientURLs) == 0:
			return m, fmt.Sprintf("%s has not started yet; it is carried out once it has", name)
		case m.IsLearner:
			return m, fmt.Sprintf("%s is a learner, %s; it is carried out once %s is promoted", name, ifLearner, name)
		case !probed || err != nil:
			return m, fmt.Sprintf("%s does not answer (the Degraded condition says why); it is carried out once it does", name)
		}
		return m, ""
	}
	slices.Sort(names)
	return etcd.Member{}, fmt.Sprintf("no member of the cluster is named %q (members: %s); name one of them", name, strings.Join(names, ", "))
}

// planMoveLeader plans the request of AnnotationMoveLeader: a step when
// it can be carried out, or why it waits.
func planMoveLeader(c *etcdv1alpha1.EtcdCluster, p probe) (step maintenance, act bool, held string) {
	to, asked := c.Annotations[etcdv1alpha1.AnnotationMoveLeader]
	if !asked {
		return maintenance{}, false, ""
	}
	waits := func(why string) (maintenance, bool, string) {
		return maintenance{}, false, fmt.Sprintf("The request to move leadership to %q waits: %s, or %s", to, why, cancelHint(c, etcdv1alpha1.AnnotationMoveLeader))
	}
	m, problem := requestMember(c, p, to, "which cannot lead")
	if problem != "" {
		return waits(problem)
	}
	leader := ""
	for _, l := range p.members {
		if l.ID == p.leader {
			leader = memberName(c, l)
		}
	}
	if leader == "" {
		return waits("the cluster has no leader; it is carried out once it has one")
	}
	edit := requestEdit{test: etcdv1alpha1.AnnotationMoveLeader, remove: []string{etcdv1alpha1.AnnotationMoveLeader}}
	if m.ID == p.leader {
		return maintenance{kind: maintRequestDone, member: to, edit: &edit,
			reason: fmt.Sprintf("member %s leads already, as the annotation %s asks", to, etcdv1alpha1.AnnotationMoveLeader)}, true, ""
	}
	return maintenance{kind: maintMoveLeader, member: to, id: m.ID, from: leader, edit: &edit,
		reason: fmt.Sprintf("moving leadership from %s to %s, as the annotation %s asks", leader, to, etcdv1alpha1.AnnotationMoveLeader)}, true, ""
}

// defragmentedSoFar is the members AnnotationDefragmented lists.
func defragmentedSoFar(c *etcdv1alpha1.EtcdCluster) []string {
	var out []string
	for n := range strings.SplitSeq(c.Annotations[etcdv1alpha1.AnnotationDefragmented], ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// planRequestedDefrag plans the request of AnnotationDefragment: the
// next member to defragment (followers first, the leader last, and only
// while every member is healthy, as the operator's own upkeep does),
// or why it waits. For "all", AnnotationDefragmented records the members
// done so far; it is removed with the request, or alone when it outlives
// the request.
func planRequestedDefrag(c *etcdv1alpha1.EtcdCluster, p probe) (step maintenance, act bool, held string) {
	what, asked := c.Annotations[etcdv1alpha1.AnnotationDefragment]
	_, recorded := c.Annotations[etcdv1alpha1.AnnotationDefragmented]
	if !asked {
		if recorded {
			return maintenance{kind: maintRequestDone, edit: &requestEdit{test: etcdv1alpha1.AnnotationDefragmented, remove: []string{etcdv1alpha1.AnnotationDefragmented}},
				reason: "the defragmentation request is gone: forgetting its progress"}, true, ""
		}
		return maintenance{}, false, ""
	}
	waits := func(why string) (maintenance, bool, string) {
		return maintenance{}, false, fmt.Sprintf("The request to defragment %q waits: %s, or %s", what, why, cancelHint(c, etcdv1alpha1.AnnotationDefragment))
	}
	finished := requestEdit{test: etcdv1alpha1.AnnotationDefragment, remove: []string{etcdv1alpha1.AnnotationDefragment}}
	if recorded {
		finished.remove = append(finished.remove, etcdv1alpha1.AnnotationDefragmented)
	}
	done := defragmentedSoFar(c)
	var todo []etcd.Member
	if what == etcdv1alpha1.DefragmentAll {
		for _, m := range p.members {
			if !m.IsLearner && !slices.Contains(done, memberName(c, m)) {
				todo = append(todo, m)
			}
		}
		if len(todo) == 0 {
			return maintenance{kind: maintRequestDone, edit: &finished,
				reason: fmt.Sprintf("every voting member is defragmented, as the annotation %s asks", etcdv1alpha1.AnnotationDefragment)}, true, ""
		}
	} else {
		m, problem := requestMember(c, p, what, "which etcd does not defragment")
		if problem != "" {
			return waits(problem)
		}
		todo = []etcd.Member{m}
	}
	for _, m := range p.members {
		if err, probed := p.health[m.ID]; !probed || err != nil {
			return waits(fmt.Sprintf("%s is not healthy, and a member does not serve while it defragments; it goes on once every member is healthy", memberName(c, m)))
		}
	}
	leaderLast(c, todo, p.leader)
	m := todo[0]
	var endpoint string
	for _, st := range p.statuses {
		if st.MemberID == m.ID {
			endpoint = st.Endpoint
		}
	}
	if endpoint == "" {
		return waits(fmt.Sprintf("%s does not report its status; it is carried out once it does", memberName(c, m)))
	}
	step = maintenance{kind: maintDefragment, member: memberName(c, m), endpoint: endpoint, edit: &finished,
		reason: fmt.Sprintf("requested: %s=%s", etcdv1alpha1.AnnotationDefragment, what)}
	if len(todo) > 1 {
		step.reason += fmt.Sprintf(", %d more after it", len(todo)-1)
		progress := append(slices.Clone(done), step.member)
		step.edit = &requestEdit{test: etcdv1alpha1.AnnotationDefragment, set: map[string]string{etcdv1alpha1.AnnotationDefragmented: strings.Join(progress, ",")}}
	}
	return step, true, ""
}

// leaderLast sorts members followers first, by name, and the leader
// last: a member does not serve while it defragments.
func leaderLast(c *etcdv1alpha1.EtcdCluster, members []etcd.Member, leader uint64) {
	slices.SortFunc(members, func(a, b etcd.Member) int {
		if (a.ID == leader) != (b.ID == leader) {
			if a.ID == leader {
				return 1
			}
			return -1
		}
		return strings.Compare(memberName(c, a), memberName(c, b))
	})
}

// planRequests looks at every request: the first one that can be
// carried out now (a leader move before a defragmentation: it is quick)
// and the notes of those that wait, all of them on every pass so the
// Maintenance condition names each one as long as it waits.
func planRequests(c *etcdv1alpha1.EtcdCluster, p probe) (step maintenance, act bool, held []string) {
	for _, plan := range []func(*etcdv1alpha1.EtcdCluster, probe) (maintenance, bool, string){planMoveLeader, planRequestedDefrag} {
		s, ok, why := plan(c, p)
		if why != "" {
			held = append(held, why)
		}
		if ok && !act {
			step, act = s, true
		}
	}
	return step, act, held
}

// heldEvents are the Warning events of requests that began to wait since
// the last pass: a note the last Maintenance condition did not carry yet.
// The notes name no error text, so a request that keeps waiting for the
// same reason is reported once.
func heldEvents(c *etcdv1alpha1.EtcdCluster, step maintenance) []healthEvent {
	was := ""
	for _, cond := range c.Status.Conditions {
		if cond.Type == etcdv1alpha1.ConditionMaintenance {
			was = cond.Message
		}
	}
	var out []healthEvent
	for _, h := range step.held {
		if !strings.Contains(was, h) {
			out = append(out, healthEvent{"Warning", "RequestHeld", h})
		}
	}
	return out
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// requestPatch is the JSON patch of a request edit on c: a test that the
// request still has the value this pass acted on, then the changes.
func requestPatch(c *etcdv1alpha1.EtcdCluster, e requestEdit) ([]byte, error) {
	path := func(key string) string {
		return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	}
	ops := []map[string]any{{"op": "test", "path": path(e.test), "value": c.Annotations[e.test]}}
	for _, k := range slices.Sorted(maps.Keys(e.set)) {
		ops = append(ops, map[string]any{"op": "add", "path": path(k), "value": e.set[k]})
	}
	for _, k := range e.remove {
		ops = append(ops, map[string]any{"op": "remove", "path": path(k)})
	}
	return json.Marshal(ops)
}

// requestMessage adds the notes of waiting requests to a Maintenance
// condition.
func requestMessage(cond metav1.Condition, held []string) metav1.Condition {
	if len(held) == 0 {
		return cond
	}
	notes := strings.Join(held, ". ")
	if cond.Message == "" {
		cond.Message = notes
	} else {
		cond.Message += ". " + notes
	}
	return cond
}
