package crashpoint

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestHit(t *testing.T) {
	tests := []struct {
		name  string
		steps string
		dir   bool
		hits  []string
		want  []string // the steps that exit
	}{
		{name: "unarmed", hits: []string{"AddLearner"}},
		{name: "other step", steps: "Promote", hits: []string{"AddLearner"}},
		{name: "every time without a dir", steps: "AddLearner, Promote", hits: []string{"AddLearner", "AddLearner", "Promote"}, want: []string{"AddLearner", "AddLearner", "Promote"}},
		{name: "once with a dir", steps: "AddLearner,Promote", dir: true, hits: []string{"AddLearner", "Promote", "AddLearner", "Promote"}, want: []string{"AddLearner", "Promote"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvSteps, tt.steps)
			t.Setenv(EnvDir, "")
			if tt.dir {
				t.Setenv(EnvDir, t.TempDir())
			}
			var exited []string
			for _, step := range tt.hits {
				// A new process for each hit, as after a crash.
				p := FromEnv()
				p.crash = func() { exited = append(exited, step) }
				p.Hit(step)
			}
			if !slices.Equal(exited, tt.want) {
				t.Fatalf("exited at %v, want %v", exited, tt.want)
			}
		})
	}
}

// TestCrashStartsAfresh runs a process that hits an armed step: it
// crashes and starts again in place (the same process ID, as in the same
// container), and the new run goes past the step, once.
func TestCrashStartsAfresh(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") != "" {
		FromEnv().Hit("AddLearner")
		fmt.Printf("past the step as %d\n", os.Getpid())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashStartsAfresh$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", EnvSteps+"=AddLearner", EnvDir+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if n := strings.Count(string(out), "crashpoint: crashing right after step AddLearner"); n != 1 {
		t.Errorf("crashed %d times, want once: %s", n, out)
	}
	if want := fmt.Sprintf("past the step as %d\n", cmd.Process.Pid); strings.Count(string(out), want) != 1 {
		t.Errorf("output %q does not say once %q", out, want)
	}
}
