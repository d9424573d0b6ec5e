package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun checks what the binary prints and returns, without an API
// server: errors are one line on stderr and exit code 1.
func TestRun(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "help", args: []string{"--help"}, wantStdout: "kubectl etcd [command]"},
		{name: "unknown verb", args: []string{"backup", "main"}, wantCode: 1, wantStderr: `error: unknown command "backup" for "kubectl etcd"` + "\n"},
		{name: "move-leader without --to", args: []string{"move-leader", "main"}, wantCode: 1, wantStderr: "error: kubectl etcd move-leader needs --to MEMBER: the member to lead\n"},
		{name: "missing name", args: []string{"members"}, wantCode: 1, wantStderr: "error: kubectl etcd members takes the name of one EtcdCluster: kubectl etcd members NAME [flags]\n"},
		{name: "missing kubeconfig", args: []string{"--kubeconfig", missing, "status", "main"}, wantCode: 1, wantStderr: "error: reading the kubeconfig: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.wantStdout)
			}
			if !strings.HasPrefix(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q does not start with %q", stderr.String(), tc.wantStderr)
			}
			if tc.wantCode != 0 && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr is not one line: %q", stderr.String())
			}
		})
	}
}
