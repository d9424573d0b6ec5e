// Package crashpoint stops the operator right after a named step, so tests
// can prove that every step is safe to interrupt: the process ends as a
// crash would, without cleanup, and the next one must converge.
//
// The next one is the same binary started afresh in the same container
// (exec): to the reconcilers a crash and a restart (nothing in memory
// survives, nothing is cleaned up, the leader lease is held until it
// runs out), without the kubelet's back-off between the restarts of a
// crashing container, which made a test crashing at every step wait
// minutes for nothing it checks.
//
// ETCD_OPERATOR_CRASH_AT lists the steps, comma-separated. With
// ETCD_OPERATOR_CRASH_DIR set to a directory that outlives the process (an
// emptyDir of the operator's Pod), each step crashes the operator once;
// without it, every time. Unset, Hit does nothing.
package crashpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Environment variables that arm the crash points.
const (
	EnvSteps = "ETCD_OPERATOR_CRASH_AT"
	EnvDir   = "ETCD_OPERATOR_CRASH_DIR"
)

// Points are armed crash points.
type Points struct {
	steps []string
	dir   string
	crash func()
}

// FromEnv reads the crash points from the environment.
func FromEnv() *Points {
	var steps []string
	for s := range strings.SplitSeq(os.Getenv(EnvSteps), ",") {
		if s = strings.TrimSpace(s); s != "" {
			steps = append(steps, s)
		}
	}
	return &Points{steps: steps, dir: os.Getenv(EnvDir), crash: restartInPlace}
}

// restartInPlace replaces the process with a new run of its binary, with
// the same arguments and environment; it exits when it cannot.
func restartInPlace() {
	err := syscall.Exec("/proc/self/exe", os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "crashpoint: cannot start again (%v); exiting\n", err)
	os.Exit(3)
}

// Hit crashes the process when step is armed and has not crashed it yet.
func (p *Points) Hit(step string) {
	if p == nil || !slices.Contains(p.steps, step) {
		return
	}
	if p.dir != "" {
		marker := filepath.Join(p.dir, step)
		if _, err := os.Stat(marker); err == nil {
			return
		}
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "crashpoint: cannot remember step %s in %s (%v); not crashing\n", step, p.dir, err)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "crashpoint: crashing right after step %s\n", step)
	p.crash()
}
