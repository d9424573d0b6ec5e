package support

import (
	"sync"
	"testing"
	"time"
)

// resetSlots gives the slots n free places, as takeParallelBound would.
func resetSlots(n int) {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	slots.cond = sync.NewCond(&slots.mu)
	slots.free, slots.total = n, n
	slots.opens, slots.longWaiting = time.Time{}, 0
}

// TestSlotsGoToLongTestsFirst: of the tests that ask for the one slot
// within the settle time, the Long one gets it first whoever asked first;
// once the group has ended (every slot free), the next group settles its
// order again.
func TestSlotsGoToLongTestsFirst(t *testing.T) {
	for group := range 2 {
		if group == 0 { // the second group finds the slots as the first left them
			resetSlots(1)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		run := func(name string, cost Cost) {
			defer wg.Done()
			take(cost)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			give()
		}
		names := []string{"short-1", "short-2", "long", "short-3", "short-4"}
		wg.Add(len(names))
		for _, name := range names {
			cost := Short
			if name == "long" {
				cost = Long
			}
			go run(name, cost)
			time.Sleep(50 * time.Millisecond)
		}
		wg.Wait()
		if len(order) != len(names) || order[0] != "long" {
			t.Errorf("group %d: slots given in the order %v, want long first", group, order)
		}
	}
}
