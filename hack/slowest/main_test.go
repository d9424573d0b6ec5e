package main

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-operator/etcd-operator/test/support"
)

func TestSlotWaitPrefixMatchesSupport(t *testing.T) {
	t.Parallel()
	if slotWaitPrefix != support.SlotWaitPrefix {
		t.Fatalf("slotWaitPrefix %q, support logs %q", slotWaitPrefix, support.SlotWaitPrefix)
	}
}

func TestSlowestLeavesTheSlotWaitOut(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 12, 5, 0, 0, s, 0, time.UTC) }
	slot := func(s int, test string) event {
		return event{Time: at(s), Action: "output", Package: "e2e", Test: test, Output: "    x_test.go:1: " + slotWaitPrefix + "1s\n"}
	}
	pass := func(s int, test string, elapsed float64) event {
		return event{Time: at(s), Action: "pass", Package: "e2e", Test: test, Elapsed: elapsed}
	}
	events := []event{
		// Waited 100 s for a slot, then ran 20 s.
		slot(100, "TestShort"), pass(120, "TestShort", 120),
		// A table test: its subtests got slots at 50 and 70.
		slot(50, "TestTable/a"), pass(60, "TestTable/a", 60),
		slot(70, "TestTable/b"), pass(90, "TestTable/b", 90),
		pass(90, "TestTable", 90),
		// Ran alone, before the group: as Go timed it.
		pass(40, "TestAlone", 40),
	}
	var got []string
	for _, r := range slowest(events) {
		got = append(got, r.name+" "+r.took.String())
	}
	want := "e2e TestAlone 40s, e2e TestTable 40s, e2e TestShort 20s, e2e TestTable/b 20s, e2e TestTable/a 10s"
	if strings.Join(got, ", ") != want {
		t.Errorf("slowest:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
}
