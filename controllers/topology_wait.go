package controllers

import (
	"time"
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
