// Package history records what a client did on etcd and checks it: is it
// linearizable (porcupine, as etcd's robustness tests do), and is every
// acknowledged write still there. The fault campaign (test/chaos) keeps
// one history per cluster.
package history

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one operation a writer did on etcd: a put of a value never
// written before, or a get. A put whose outcome is unknown (an error: it
// may still have been applied) returns at infinity, so the checker may
// place it anywhere after its call, or never observe it.
type Op struct {
	Key   string
	Put   bool
	Value string // put: the value written; get: the value read ("" when absent)
	OK    bool   // the put was acknowledged
	Call  int64  // nanoseconds since the history began (History.Now)
	Ret   int64
	// ClusterID is the cluster ID etcd's answer carried (acknowledged
	// operations).
	ClusterID uint64
}

// History is what one cluster's writer did, and the cluster IDs etcd's
// answers carried.
type History struct {
	mu         sync.Mutex
	start      time.Time
	ops        []Op
	clusterIDs map[uint64]bool
}

// New starts an empty history; its clock starts now.
func New() *History {
	return &History{start: time.Now(), clusterIDs: map[uint64]bool{}}
}

// Now is the history's clock: nanoseconds since it began.
func (h *History) Now() int64 { return time.Since(h.start).Nanoseconds() }

// At is time t on the history's clock.
func (h *History) At(t time.Time) int64 { return t.Sub(h.start).Nanoseconds() }

// Add records an operation that ended now: an acknowledged one, a failed
// put (it may have been applied: its return is infinity), or nothing for
// a failed get (it constrains nothing).
func (h *History) Add(o Op, clusterID uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		o.OK, o.Ret, o.ClusterID = true, h.Now(), clusterID
		if clusterID != 0 {
			h.clusterIDs[clusterID] = true
		}
	case o.Put:
		o.Ret = math.MaxInt64
	default:
		return
	}
	h.ops = append(h.ops, o)
}

// kvInput and kvOutput are an operation as porcupine sees it.
type kvInput struct {
	key, value string
	put        bool
}

type kvOutput struct{ value string }

// unknown is the state of a key whose value the checker does not know:
// no value the writer puts or reads is ever this.
const unknown = "\x00unknown"

// kvModel is a map of registers, one per key, checked key by key, each
// starting absent (""), or, from unknown, at whatever its first read
// returns.
func kvModel(start string) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, o := range history {
				k := o.Input.(kvInput).key
				byKey[k] = append(byKey[k], o)
			}
			var out [][]porcupine.Operation
			for _, k := range slices.Sorted(maps.Keys(byKey)) {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() any { return start },
		Step: func(state, input, output any) (bool, any) {
			in := input.(kvInput)
			switch {
			case in.put:
				return true, in.value
			case state.(string) == unknown:
				return true, output.(kvOutput).value
			}
			return output.(kvOutput).value == state.(string), state
		},
		DescribeOperation: func(input, output any) string {
			in := input.(kvInput)
			if in.put {
				return fmt.Sprintf("put(%s, %s)", in.key, in.value)
			}
			return fmt.Sprintf("get(%s) -> %q", in.key, output.(kvOutput).value)
		},
	}
}

// Linearizable checks the history with porcupine: Ok, Illegal, or Unknown
// when the check did not finish within timeout.
func (h *History) Linearizable(timeout time.Duration) porcupine.CheckResult {
	return h.LinearizableRebuilt(timeout, math.MaxInt64)
}

// LinearizableRebuilt checks the history of a cluster rebuilt at rebuilt
// (History.Now) from a survivor, which may lack writes acknowledged before:
// the operations called before, and those called after from whatever
// value each key had then, each part linearizable on its own. The worse
// result of the two.
func (h *History) LinearizableRebuilt(timeout time.Duration, rebuilt int64) porcupine.CheckResult {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	var before, after []porcupine.Operation
	for _, o := range ops {
		op := porcupine.Operation{
			Input: kvInput{key: o.Key, value: o.Value, put: o.Put}, Call: o.Call,
			Output: kvOutput{value: o.Value}, Return: o.Ret,
		}
		if o.Call < rebuilt {
			before = append(before, op)
		} else {
			after = append(after, op)
		}
	}
	result := porcupine.CheckOperationsTimeout(kvModel(""), before, timeout)
	if len(after) > 0 && result != porcupine.Illegal {
		switch r := porcupine.CheckOperationsTimeout(kvModel(unknown), after, timeout); {
		case r == porcupine.Illegal, result == porcupine.Ok:
			result = r
		}
	}
	return result
}

// LostWrites lists the keys whose final value (final, read after the
// faults stopped) is older than their last acknowledged put: values are
// the writer's sequence numbers, so a later put has a larger one.
func (h *History) LostWrites(final map[string]string) []string {
	return h.LostWritesBefore(final, math.MaxInt64)
}

// LostWritesBefore is LostWrites for the puts acknowledged before before
// (History.Now): what a snapshot whose taking began at before must hold.
func (h *History) LostWritesBefore(final map[string]string, before int64) []string {
	return h.LostWritesAmong(final, func(o Op) bool { return o.Ret < before })
}

// LostWritesAmong is LostWrites for the acknowledged puts among chooses.
func (h *History) LostWritesAmong(final map[string]string, among func(Op) bool) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	lastAcked := map[string]int{}
	for _, o := range h.ops {
		if o.Put && o.OK && among(o) {
			n, _ := strconv.Atoi(o.Value)
			lastAcked[o.Key] = max(lastAcked[o.Key], n)
		}
	}
	var lost []string
	for _, k := range slices.Sorted(maps.Keys(lastAcked)) {
		got, err := strconv.Atoi(final[k])
		if err != nil || got < lastAcked[k] {
			lost = append(lost, fmt.Sprintf("%s: acknowledged %d, reads %q", k, lastAcked[k], final[k]))
		}
	}
	return lost
}

// Acknowledged are the operations etcd acknowledged, oldest first.
func (h *History) Acknowledged() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ok []Op
	for _, o := range h.ops {
		if o.OK || !o.Put {
			ok = append(ok, o)
		}
	}
	return ok
}

// Counts are the acknowledged and failed puts and the reads.
func (h *History) Counts() (acked, failed, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.ops {
		switch {
		case o.Put && o.OK:
			acked++
		case o.Put:
			failed++
		default:
			reads++
		}
	}
	return acked, failed, reads
}

// ClusterIDs are the cluster IDs etcd's acknowledgements carried.
func (h *History) ClusterIDs() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]uint64, 0, len(h.clusterIDs))
	for id := range h.clusterIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
