package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	var manyLines strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&manyLines, "line %d\n", i)
	}
	var want80 strings.Builder
	for i := 21; i <= 100; i++ {
		fmt.Fprintf(&want80, "line %d\n", i)
	}
	long := strings.Repeat("a", 100) + strings.Repeat("b", maxTerminationMessage)
	const (
		file     = corev1.TerminationMessageReadFile
		fallback = corev1.TerminationMessageFallbackToLogsOnError
	)
	missing := "missing" // a name whose file is not written
	tests := []struct {
		name     string
		policy   corev1.TerminationMessagePolicy
		termLog  string
		runLog   string
		exitCode int
		want     string
	}{
		{"the file", file, "done: 42\n", "log\n", 0, "done: 42\n"},
		{"the file of a failed run", file, "bad config", "log\n", 1, "bad config"},
		{"empty file", file, "", "log\n", 1, ""},
		{"no file", file, missing, "log\n", 1, ""},
		{"the last 4096 bytes of a long file", file, long, "", 0, strings.Repeat("b", maxTerminationMessage)},
		{"fallback prefers the file", fallback, "written", "log\n", 2, "written"},
		{"fallback to the log of a failed run", fallback, "", "starting\npanic: boom\n", 2, "starting\npanic: boom\n"},
		{"fallback to the log without a file", fallback, missing, "panic: boom\n", 137, "panic: boom\n"},
		{"no fallback for a run that succeeded", fallback, "", "all good\n", 0, ""},
		{"fallback takes the last 80 lines", fallback, "", manyLines.String(), 1, want80.String()},
		{"fallback takes at most 2048 bytes", fallback, "", strings.Repeat("x", 5000) + "\n", 1, strings.Repeat("x", maxTerminationMessageLogBytes-1) + "\n"},
		{"fallback with an empty log", fallback, "", "", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			termLog, runLog := filepath.Join(dir, "termination-log"), filepath.Join(dir, "0.log")
			if tt.termLog != missing {
				if err := os.WriteFile(termLog, []byte(tt.termLog), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(runLog, []byte(tt.runLog), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := terminationMessage(tt.policy, termLog, runLog, tt.exitCode); got != tt.want {
				t.Errorf("terminationMessage = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResetTerminationLog(t *testing.T) {
	t.Parallel()
	path := terminationLog(t.TempDir(), "main")
	if err := resetTerminationLog(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("the first run's message"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := resetTerminationLog(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 || fi.Mode().Perm() != 0o666 {
		t.Errorf("after a reset: %d bytes, mode %v; want an empty file of mode 0666", fi.Size(), fi.Mode().Perm())
	}
}
