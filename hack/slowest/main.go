// Command slowest prints the slowest tests of `go test -json` files, each
// timed from when it got a slot to run (support.Parallel logs the wait),
// not from when Go started it: a test of the e2e parallel group may wait
// minutes for a slot, and that wait is not its cost.
//
//	go run ./hack/slowest [-n 10] .testlogs/*.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// slotWaitPrefix starts the line support.Parallel logs when a test got
// its slot (support.SlotWaitPrefix; a test checks they match).
const slotWaitPrefix = "support: waited for a slot: "

// event is a line of `go test -json`.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// result is how long one test ran.
type result struct {
	name string
	took time.Duration
}

func main() {
	n := flag.Int("n", 10, "how many tests to print")
	flag.Parse()
	var events []event
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		evs, err := read(f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(1)
		}
		events = append(events, evs...)
	}
	results := slowest(events)
	if len(results) > *n {
		results = results[:*n]
	}
	for _, r := range results {
		fmt.Printf("%s %s\n", r.name, r.took.Round(10*time.Millisecond))
	}
}

// read parses a `go test -json` stream, skipping lines that are not
// events (a build's output).
func read(r io.Reader) ([]event, error) {
	var events []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Action != "" {
			events = append(events, e)
		}
	}
	return events, sc.Err()
}

// slowest times every test that ended, slowest first. A test that logged
// its wait for a slot began when it got one; a test that did not but
// whose subtests did (a table test) began when the first of them got
// one; any other test ran for the time Go reports.
func slowest(events []event) []result {
	type key struct{ pkg, test string }
	slotAt := map[key]time.Time{}
	type end struct {
		at      time.Time
		elapsed time.Duration
	}
	ended := map[key]end{}
	for _, e := range events {
		if e.Test == "" {
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			if strings.Contains(e.Output, slotWaitPrefix) {
				slotAt[k] = e.Time
			}
		case "pass", "fail":
			ended[k] = end{e.Time, time.Duration(e.Elapsed * float64(time.Second))}
		}
	}
	// A test began when it got its slot; a parent without a slot of its
	// own, when the first of its descendants got one.
	began := map[key]time.Time{}
	for k, at := range slotAt {
		began[k] = at
	}
	for k, at := range slotAt {
		for name := k.test; strings.Contains(name, "/"); {
			name = name[:strings.LastIndex(name, "/")]
			parent := key{k.pkg, name}
			if _, own := slotAt[parent]; own {
				break
			}
			if b, ok := began[parent]; !ok || at.Before(b) {
				began[parent] = at
			}
		}
	}
	var results []result
	for k, e := range ended {
		took := e.elapsed
		if b, ok := began[k]; ok {
			took = e.at.Sub(b)
		}
		results = append(results, result{k.pkg + " " + k.test, took})
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].took != results[j].took {
			return results[i].took > results[j].took
		}
		return results[i].name < results[j].name
	})
	return results
}
