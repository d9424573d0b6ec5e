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
