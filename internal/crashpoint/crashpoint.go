// Package crashpoint stops the operator right after a named step, so tests
// can prove that every step is safe to interrupt: the process exits as a
// crash would, without cleanup, and the next one must converge.
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
	exit  func(code int)
}

// FromEnv reads the crash points from the environment.
func FromEnv() *Points {
	var steps []string
	for s := range strings.SplitSeq(os.Getenv(EnvSteps), ",") {
		if s = strings.TrimSpace(s); s != "" {
			steps = append(steps, s)
		}
	}
	return &Points{steps: steps, dir: os.Getenv(EnvDir), exit: os.Exit}
}

// Hit exits the process when step is armed and has not crashed it yet.
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
	p.exit(3)
}
