package support

import (
	"flag"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Cost tells the slots how long a parallel test is expected to run.
type Cost int

const (
	// Short tests take a slot in any order.
	Short Cost = iota
	// Long tests (minutes: the parallel group's longest) take a slot
	// before any Short test waiting: started last, one of them would run
	// on alone after the rest of the group has finished.
	Long
)

// settle is how long the slots wait after the first test asks before
// they give one out, so that every test released with it (Go releases
// the whole parallel group at once) is waiting and the Long ones go
// first.
const settle = time.Second

// slots bound how many parallel tests run at once: -test.parallel of
// them (E2E_PARALLEL in the Makefile). Go's own bound hands its slots out
// in no particular order; the suite takes the bound over (takeParallelBound)
// to start the long tests first.
var slots struct {
	mu          sync.Mutex
	cond        *sync.Cond
	free, total int
	opens       time.Time // zero until a test first asks, after the group's end again
	longWaiting int
}

// takeParallelBound makes the slots the bound of the package's parallel
// tests: they get -test.parallel slots, and Go's own bound is lifted so
// that it does not choose which test runs first. Call it after flag.Parse,
// before m.Run.
func takeParallelBound() {
	n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil || n < 1 {
		n = 1
	}
	slots.cond = sync.NewCond(&slots.mu)
	slots.free, slots.total = n, n
	if err := flag.Set("test.parallel", "1000"); err != nil {
		panic(err)
	}
}

// Parallel runs t in the parallel group, in one of the slots, which it
// holds until t and its subtests end. Every test of the group that does
// work calls it (not t.Parallel, which Go no longer bounds); a table test
// whose body only starts parallel subtests calls t.Parallel, and each
// subtest calls Parallel. The time a test waited for its slot is logged,
// and the suite's timing report (hack/slowest) leaves it out.
func Parallel(t *testing.T, cost Cost) {
	t.Helper()
	t.Parallel()
	if slots.cond == nil { // a package that did not call takeParallelBound: Go bounds it
		return
	}
	asked := time.Now()
	take(cost)
	t.Cleanup(give)
	t.Logf("%s%s", SlotWaitPrefix, time.Since(asked).Round(time.Millisecond))
}

// SlotWaitPrefix starts the line Parallel logs with the wait for a slot.
const SlotWaitPrefix = "support: waited for a slot: "

func take(cost Cost) {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.opens.IsZero() {
		slots.opens = time.Now().Add(settle)
		time.AfterFunc(settle, func() {
			slots.mu.Lock()
			defer slots.mu.Unlock()
			slots.cond.Broadcast()
		})
	}
	if cost == Long {
		slots.longWaiting++
	}
	for time.Now().Before(slots.opens) || slots.free == 0 || (cost == Short && slots.longWaiting > 0) {
		slots.cond.Wait()
	}
	if cost == Long {
		slots.longWaiting--
	}
	slots.free--
}

func give() {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	slots.free++
	if slots.free == slots.total && slots.longWaiting == 0 {
		// Every slot is free: the next test to ask (the group of the
		// next -count pass) settles the order again.
		slots.opens = time.Time{}
	}
	slots.cond.Broadcast()
}
