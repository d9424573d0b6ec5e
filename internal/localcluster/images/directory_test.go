package images

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeDirectoryImage makes the directory image repo:tag in b with config
// and the given directories in its rootfs.
func writeDirectoryImage(t *testing.T, b testBin, repo, tag, config string, dirs ...string) string {
	t.Helper()
	dir := filepath.Join(b.dir, DirectoryImagesDir, repo, tag)
	for _, d := range append([]string{""}, dirs...) {
		if err := os.MkdirAll(filepath.Join(dir, "rootfs", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "image.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDirectoryImage(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, true)
	catalog := writeDirectoryImage(t, b, "ghcr.io/etcd-operator/etcd-operator-catalog", "v0.1.0",
		`{"from": "quay.io/operator-framework/opm:v1.65.0", "entrypoint": ["/bin/opm"], "cmd": ["serve", "/configs", "--cache-dir=/tmp/cache"]}`, "configs")
	bundle := writeDirectoryImage(t, b, "ghcr.io/etcd-operator/etcd-operator-bundle", "v0.1.0",
		`{"from": "scratch"}`, "manifests", "metadata")
	writeDirectoryImage(t, b, "example.com/tools", "v1", `{"from": "busybox"}`, "tools")
	writeDirectoryImage(t, b, "example.com/over-bin", "v1", `{"from": "busybox"}`, "bin")
	writeDirectoryImage(t, b, "example.com/no-from", "v1", `{}`)
	writeDirectoryImage(t, b, "example.com/unknown-from", "v1", `{"from": "nginx:1.27"}`)
	writeDirectoryImage(t, b, "example.com/stacked", "v1", `{"from": "ghcr.io/etcd-operator/etcd-operator-bundle:v0.1.0"}`)
	writeDirectoryImage(t, b, "example.com/entrypoint-not-in-from", "v1", `{"from": "quay.io/operator-framework/opm:v1.65.0", "entrypoint": ["/bin/etcd"]}`)

	got, err := b.table().Resolve("ghcr.io/etcd-operator/etcd-operator-catalog:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	got.path = ""
	want := Image{
		Ref:        "ghcr.io/etcd-operator/etcd-operator-catalog:v0.1.0",
		Binaries:   map[string]string{"opm": b.bin("opm-v1.65.0"), "grpc_health_probe": b.bin("grpc_health_probe-v0.4.47")},
		Entrypoint: []string{b.bin("opm-v1.65.0")},
		Cmd:        []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		Files:      map[string]string{"/configs": filepath.Join(catalog, "rootfs", "configs")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("catalog image:\n%+v\nwant\n%+v", got, want)
	}
	argv, err := got.Argv(nil, nil, nil)
	if err != nil || !reflect.DeepEqual(argv, []string{b.bin("opm-v1.65.0"), "serve", "/configs", "--cache-dir=/tmp/cache"}) {
		t.Errorf("catalog image's default command: %q, %v", argv, err)
	}

	got, err = b.table().Resolve("ghcr.io/etcd-operator/etcd-operator-bundle:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if got.HostCommands || len(got.Binaries) > 0 || got.Entrypoint != nil || got.Cmd != nil || !reflect.DeepEqual(got.Files, map[string]string{
		"/manifests": filepath.Join(bundle, "rootfs", "manifests"),
		"/metadata":  filepath.Join(bundle, "rootfs", "metadata"),
	}) {
		t.Errorf("bundle image built from scratch: %+v", got)
	}
	if _, err := got.Argv([]string{"/util/cpb", "/bundle"}, nil, []string{"/util"}); err != nil {
		t.Errorf("a scratch image runs a command from a volume: %v", err)
	}

	got, err = b.table().Resolve("example.com/tools:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.HostCommands || !reflect.DeepEqual(got.Cmd, []string{b.cmd("sh")}) {
		t.Errorf("image built from busybox: %+v, want busybox's commands and CMD", got)
	}

	for ref, wantErr := range map[string]string{
		"ghcr.io/etcd-operator/etcd-operator-catalog:v9.9.9": "is not an image of the local cluster",
		"example.com/over-bin:v1":                            "cannot put an image's files in /bin, which it binds from the host",
		"example.com/no-from:v1":                             "names no image to build from (from)",
		"example.com/unknown-from:v1":                        "the image it is built from: docker.io/library/nginx:1.27 is not an image of the local cluster",
		"example.com/stacked:v1":                             "another directory image",
		"example.com/entrypoint-not-in-from:v1":              `command "/bin/etcd" is not in image`,
	} {
		if _, err := b.table().Resolve(ref); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Resolve(%q) = %v, want an error containing %q", ref, err, wantErr)
		}
	}
}
