package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// maxWaitRequeue bounds how long a cluster that keeps waiting for the same
// thing goes without a pass.
const maxWaitRequeue = 30 * time.Second

// waiting is what a cluster's passes have been waiting for, and since
// when; the zero value when the last pass did not wait.
type waiting struct {
	kind   actionKind
	member string
	since  time.Time
}

// nextWait is how long to wait after a pass that took step and asked for
// wait, given what the passes before waited for (prev), and what the next
// pass will have waited for. A wait (for Pods to start, for a person to
// mend a refused spec) that goes on is looked at less and less often:
// waitRequeue at first, then half the time waited so far, at most
// maxWaitRequeue, and never past the wait's own end (step.until). Every
// change a watch reports (a Pod, the spec, a child) starts a pass at once
// whatever the wait; the requeue only catches what no watch reports. With
// a thousand clusters whose members never start, a fixed 2 s wait was 500
// passes a second, and a spec change waited 25 s behind them in the queue.
// A pass with nothing to do that looks again (lookAgain: a member not
// ready yet) backs off the same way. Other steps (a learner etcd has not
// let be promoted yet) keep their wait.
func nextWait(prev waiting, step action, wait time.Duration, now time.Time) (time.Duration, waiting) {
	if wait != waitRequeue || (step.kind != actWait && step.kind != actBlocked && step.kind != actRefuse && step.kind != actNone) {
		return wait, waiting{}
	}
	cur := waiting{kind: step.kind, member: step.member, since: now}
	if prev.kind == cur.kind && prev.member == cur.member && !prev.since.IsZero() {
		cur.since = prev.since
		wait = min(max(waitRequeue, now.Sub(prev.since)/2), maxWaitRequeue)
	}
	if !step.until.IsZero() {
		wait = min(wait, max(step.until.Sub(now), stepRequeue))
	}
	return wait, cur
}

// foundingOnWatches tells whether a pass that took step needs no look
// again: the cluster has not formed, its founders' Pods exist but none has
// an address (not scheduled, or its sandbox not up), and step only waits.
// Then only a Pod can change what the next pass sees (its etcd cannot
// answer before it has an address, and a new cluster has no member whose
// data could be lost), and the Pod watch starts that pass. A thousand such
// clusters otherwise cost a pass every 30 s each (make bench, fleet).
// Before the Pods exist the wait may be for the PKI reconciler's
// certificates, whose status conditions no watch of this reconciler
// reports: that wait keeps its requeue.
func foundingOnWatches(o observed, step action) bool {
	if o.cluster.Status.ClusterID != "" || (step.kind != actWait && step.kind != actNone) || !step.until.IsZero() || len(o.pods) == 0 {
		return false
	}
	for _, p := range o.pods {
		if p.Status.PodIP != "" {
			return false
		}
	}
	return true
}

// lookAgain tells whether a pass with nothing to do must still be
// followed by another: fewer voters are ready than the cluster wants (a
// probe that failed, a Pod not Ready yet), and no watch reports a member
// that starts answering. Without it the Ready condition stayed at "2 of 3"
// for minutes after a roll whose last member's first probe failed
// (TestUpgrade35To36 in CI), until something else woke the cluster.
func lookAgain(o observed, step action) bool {
	return step.kind == actNone && readyVoters(o) < int(o.cluster.DesiredReplicas())
}

// learnerRequeue is how soon to ask again to promote learner name, which
// etcd says has not caught up: a new learner catches up within a second
// of its etcd starting, so at first every stepRequeue, then less often (a
// quarter of its Pod's age), every waitRequeue at most, which a learner
// catching up a large database for minutes is asked at. A fixed 2 s was
// up to 2 s lost on every member added.
func learnerRequeue(o observed, name string) time.Duration {
	p := o.pods[name]
	if p == nil {
		return waitRequeue
	}
	return min(max(o.now.Sub(p.CreationTimestamp.Time)/4, stepRequeue), waitRequeue)
}

// etcdConnectedWindow is how long etcd's strict reconfiguration check
// wants every voter connected to the leader before it takes a change of
// membership (etcdserver.HealthInterval).
const etcdConnectedWindow = 5 * time.Second

// reconfigRequeue is how soon to ask again for a change of membership
// that etcd refused for now (etcd.ErrUnhealthyCluster). The usual cause
// is a member that started less than etcdConnectedWindow ago, right after
// it was promoted: ask again once the youngest member's etcd container
// has run that long (its start time is kept to the second, so it may be
// up to a second early), then every stepRequeue for a few seconds more
// while its connection comes up. When no member started that recently the
// cause is another (a member that does not answer): every waitRequeue. A
// fixed 2 s was up to 2 s lost on every member added after the first.
func reconfigRequeue(o observed) time.Duration {
	var youngest time.Time
	for _, p := range o.pods {
		if t := etcdStartedAt(p); t.After(youngest) {
			youngest = t
		}
	}
	due := youngest.Add(etcdConnectedWindow)
	switch {
	case youngest.IsZero() || o.now.After(due.Add(etcdConnectedWindow)):
		return waitRequeue
	case o.now.Before(due):
		return max(due.Sub(o.now), stepRequeue)
	}
	return stepRequeue
}

// etcdStartedAt is when the etcd container of p last started, zero when
// it does not run.
func etcdStartedAt(p *corev1.Pod) time.Time {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == builder.EtcdContainerName && s.State.Running != nil {
			return s.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}
