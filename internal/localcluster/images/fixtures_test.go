package images

import (
	"os"
	"path/filepath"
	"testing"
)

// testBin is a binDir and a PATH directory for tests.
type testBin struct {
	dir  string // binDir
	path string // a PATH of one directory of host commands
}

// bin returns the path of name in binDir.
func (b testBin) bin(name string) string { return filepath.Join(b.dir, name) }

// cmd returns the path of name in the PATH directory.
func (b testBin) cmd(name string) string { return filepath.Join(b.path, name) }

// table returns a Table over the test binDir and PATH.
func (b testBin) table() *Table { return &Table{binDir: b.dir, path: b.path} }

// newTestBin makes a binDir holding empty files named like the Makefile's
// (etcd v3.6.16 with etcdctl and etcdutl, etcd v3.5.21 alone, etcd
// v3.6.0-rc.1, the manager, cert-manager's controller v1.17.2, versitygw
// v1.8.0, and others
// that are no image's), a dangling etcd-v3.4.0 symlink, and a PATH directory
// with executable sh, sleep and cat and a non-executable noexec; with
// manager false there is no manager.
func newTestBin(t *testing.T, manager bool) testBin {
	t.Helper()
	b := testBin{dir: t.TempDir(), path: t.TempDir()}
	files := []string{
		"etcd-v3.6.16", "etcdctl-v3.6.16", "etcdutl-v3.6.16",
		"etcd-v3.5.21",
		"etcd-v3.6.0-rc.1",
		"cert-manager-controller-v1.17.2",
		"versitygw-v1.8.0",
		"opm-v1.65.0", "grpc_health_probe-v0.4.9", "grpc_health_probe-v0.4.47",
		"kube-apiserver-v1.37.2", "controller-gen-v0.23.0", "etcdctl-v3.9.9",
	}
	if manager {
		files = append(files, "manager")
	}
	for _, f := range files {
		write(t, b.bin(f), 0o644)
	}
	if err := os.Mkdir(b.bin("envtest-v1.37.2-etcd-v3.6.16"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(b.bin("etcd-v3.7.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.bin("missing"), b.bin("etcd-v3.4.0")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(b.bin("olm-v0.38.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"olm", "catalog", "copy-content", "cpb"} {
		write(t, b.bin("olm-v0.38.0/"+f), 0o755)
	}
	for _, c := range []string{"sh", "sleep", "cat", "cp"} {
		write(t, b.cmd(c), 0o755)
	}
	write(t, b.cmd("noexec"), 0o644)
	return b
}

// write creates an empty file p with mode perm.
func write(t *testing.T, p string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, nil, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}
