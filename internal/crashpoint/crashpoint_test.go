package crashpoint

import (
	"slices"
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
				p.exit = func(int) { exited = append(exited, step) }
				p.Hit(step)
			}
			if !slices.Equal(exited, tt.want) {
				t.Fatalf("exited at %v, want %v", exited, tt.want)
			}
		})
	}
}
