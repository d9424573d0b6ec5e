package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLinkImageBinaries: the directory put on a container's PATH holds
// one symlink per binary of the image, named after its command, to its
// host path.
func TestLinkImageBinaries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "localcluster-image-bin")
	binaries := map[string]string{
		"etcd":    "/repo/bin/etcd-v3.6.16",
		"etcdctl": "/repo/bin/etcdctl-v3.6.16",
		"etcdutl": "/repo/bin/etcdutl-v3.6.16",
	}
	if err := linkImageBinaries(dir, binaries); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(binaries) {
		t.Errorf("%s holds %d entries, want %d", dir, len(entries), len(binaries))
	}
	for name, want := range binaries {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestLinkImageBinariesNone(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "localcluster-image-bin")
	if err := linkImageBinaries(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("an image without binaries got %s (%v)", dir, err)
	}
}

func TestLinkImageBinariesRefusesPaths(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", ".", "..", "../etcd", "sub/etcd"} {
		dir := filepath.Join(t.TempDir(), "localcluster-image-bin")
		if err := linkImageBinaries(dir, map[string]string{name: "/repo/bin/etcd"}); err == nil {
			t.Errorf("%q: no error", name)
		}
	}
}

// TestBinPaths: a container sees the binaries' directory at a path of its
// own, which no volume hides; other paths are its own.
func TestBinPaths(t *testing.T) {
	bins := binPaths("/tmp/clone/bin/")
	for in, want := range map[string]string{
		"/tmp/clone/bin":                  containerBinDir,
		"/tmp/clone/bin/etcd-v3.6.16":     containerBinDir + "/etcd-v3.6.16",
		"/tmp/clone/bin/olm-v0.38.0/cpb":  containerBinDir + "/olm-v0.38.0/cpb",
		"/tmp/clone/binaries/etcd":        "/tmp/clone/binaries/etcd",
		"/tmp/tools/versions":             "/tmp/tools/versions",
		"--data-dir=/tmp/clone/bin/other": "--data-dir=/tmp/clone/bin/other",
	} {
		if got := bins.path(in); got != want {
			t.Errorf("path(%q) = %q, want %q", in, got, want)
		}
	}
	if got := binPaths("").path("/tmp/clone/bin/etcd"); got != "/tmp/clone/bin/etcd" {
		t.Errorf("with no binaries' directory, path = %q", got)
	}
	argv := []string{"/tmp/clone/bin/etcd-v3.6.16", "--name", "m0"}
	if got := bins.argv(argv); got[0] != containerBinDir+"/etcd-v3.6.16" || got[1] != "--name" || argv[0] != "/tmp/clone/bin/etcd-v3.6.16" {
		t.Errorf("argv(%v) = %v (and the input became %v)", argv, got, argv)
	}
	if got := bins.binaries(map[string]string{"etcdctl": "/tmp/clone/bin/etcdctl-v3.6.16"}); got["etcdctl"] != containerBinDir+"/etcdctl-v3.6.16" {
		t.Errorf("binaries = %v", got)
	}
}
