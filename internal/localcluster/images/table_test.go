package images

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, true)
	noManager := newTestBin(t, false)
	etcd3616 := func(ref string) Image {
		return Image{
			Ref:      ref,
			Binaries: map[string]string{"etcd": b.bin("etcd-v3.6.16"), "etcdctl": b.bin("etcdctl-v3.6.16"), "etcdutl": b.bin("etcdutl-v3.6.16")},
			Cmd:      []string{b.bin("etcd-v3.6.16")},
		}
	}
	etcd3521 := func(ref string) Image {
		return Image{Ref: ref, Binaries: map[string]string{"etcd": b.bin("etcd-v3.5.21")}, Cmd: []string{b.bin("etcd-v3.5.21")}}
	}
	operator := func(ref string) Image {
		return Image{Ref: ref, Binaries: map[string]string{"manager": b.bin("manager")}, Entrypoint: []string{b.bin("manager")}}
	}
	host := func(ref string, cmd ...string) Image { return Image{Ref: ref, HostCommands: true, Cmd: cmd} }
	known := "; the local cluster runs only: etcd as quay.io/coreos/etcd:vX.Y.Z, gcr.io/etcd-development/etcd:vX.Y.Z, " +
		"registry.k8s.io/etcd:X.Y.Z-0 or etcd:vX.Y.Z (versions in " + b.dir + ": v3.5.21, v3.6.0-rc.1, v3.6.16); " +
		"the operator as ghcr.io/etcd-operator/etcd-operator:<any tag> (manager built); " +
		"cert-manager as quay.io/jetstack/cert-manager-controller:<tag> (tags in " + b.dir + ": v1.17.2); " +
		"kube-apiserver as registry.k8s.io/kube-apiserver:<tag> (tags in " + b.dir + ": v1.37.2); " +
		"versitygw as docker.io/versity/versitygw:<tag> (tags in " + b.dir + ": v1.8.0); " +
		"OLM as quay.io/operator-framework/olm:<tag> (tags in " + b.dir + ": v0.38.0); " +
		"opm as quay.io/operator-framework/opm:<tag> (tags in " + b.dir + ": v1.65.0); " +
		"images of files in " + b.dir + "/images; " +
		"busybox, alpine, debian and ubuntu on any registry with any tag, with the host's commands"
	versityGW := func(ref string) Image {
		return Image{Ref: ref, Binaries: map[string]string{"versitygw": b.bin("versitygw-v1.8.0")}, Entrypoint: []string{b.bin("versitygw-v1.8.0")}}
	}
	olm := func(ref string) Image {
		dir := b.bin("olm-v0.38.0")
		return Image{
			Ref: ref,
			Binaries: map[string]string{
				"olm": dir + "/olm", "catalog": dir + "/catalog", "copy-content": dir + "/copy-content", "cpb": dir + "/cpb",
				"cp": b.cmd("cp"),
			},
			Entrypoint: []string{dir + "/olm"},
			Files: map[string]string{
				"/bin/olm": dir + "/olm", "/bin/catalog": dir + "/catalog", "/bin/copy-content": dir + "/copy-content", "/bin/cpb": dir + "/cpb",
			},
		}
	}
	tests := []struct {
		name    string
		table   *Table
		ref     string
		want    Image
		wantErr string // the whole message when it ends with known, else a part
	}{
		{"quay etcd", b.table(), "quay.io/coreos/etcd:v3.6.16", etcd3616("quay.io/coreos/etcd:v3.6.16"), ""},
		{"gcr etcd", b.table(), "gcr.io/etcd-development/etcd:v3.6.16", etcd3616("gcr.io/etcd-development/etcd:v3.6.16"), ""},
		{"registry.k8s.io etcd", b.table(), "registry.k8s.io/etcd:3.6.16-0", etcd3616("registry.k8s.io/etcd:3.6.16-0"), ""},
		{"registry.k8s.io etcd without build number", b.table(), "registry.k8s.io/etcd:3.5.21", etcd3521("registry.k8s.io/etcd:3.5.21"), ""},
		{"k8s.gcr.io etcd", b.table(), "k8s.gcr.io/etcd:3.5.21-1", etcd3521("k8s.gcr.io/etcd:3.5.21-1"), ""},
		{"bare etcd", b.table(), "etcd:v3.6.16", etcd3616("etcd:v3.6.16"), ""},
		{"docker.io etcd without v", b.table(), "docker.io/library/etcd:3.6.16", etcd3616("docker.io/library/etcd:3.6.16"), ""},
		{"etcd with tag and digest", b.table(), "quay.io/coreos/etcd:v3.5.21@" + digest, etcd3521("quay.io/coreos/etcd:v3.5.21@" + digest), ""},
		{
			"etcd pre-release", b.table(), "quay.io/coreos/etcd:v3.6.0-rc.1",
			Image{Ref: "quay.io/coreos/etcd:v3.6.0-rc.1", Binaries: map[string]string{"etcd": b.bin("etcd-v3.6.0-rc.1")}, Cmd: []string{b.bin("etcd-v3.6.0-rc.1")}}, "",
		},
		{
			"etcd version not built", b.table(), "quay.io/coreos/etcd:v3.4.0", Image{},
			`image "quay.io/coreos/etcd:v3.4.0": no etcd v3.4.0 in the local cluster (no file ` + b.bin("etcd-v3.4.0") + ")" + known,
		},
		{"etcd version that is a directory", b.table(), "etcd:v3.7.0", Image{}, `image "etcd:v3.7.0": no etcd v3.7.0 in the local cluster`},
		{"etcd without tag", b.table(), "quay.io/coreos/etcd", Image{}, `image "quay.io/coreos/etcd": the local cluster runs etcd images by version tag (vX.Y.Z) only` + known},
		{"etcd with digest only", b.table(), "gcr.io/etcd-development/etcd@" + digest, Image{}, "the local cluster runs etcd images by version tag (vX.Y.Z) only"},
		{"etcd with another tag", b.table(), "etcd:3.6", Image{}, "the local cluster runs etcd images by version tag (vX.Y.Z) only"},
		{"registry.k8s.io etcd with a pre-release", b.table(), "registry.k8s.io/etcd:3.6.0-rc.1", Image{}, "the local cluster runs etcd images by version tag (vX.Y.Z) only"},
		{"operator", b.table(), "ghcr.io/etcd-operator/etcd-operator:v0.1.0", operator("ghcr.io/etcd-operator/etcd-operator:v0.1.0"), ""},
		{"operator without tag", b.table(), "ghcr.io/etcd-operator/etcd-operator", operator("ghcr.io/etcd-operator/etcd-operator"), ""},
		{"operator by digest", b.table(), "ghcr.io/etcd-operator/etcd-operator@" + digest, operator("ghcr.io/etcd-operator/etcd-operator@" + digest), ""},
		{
			"operator not built", noManager.table(), "ghcr.io/etcd-operator/etcd-operator:v0.1.0", Image{},
			`image "ghcr.io/etcd-operator/etcd-operator:v0.1.0": the operator is not built (no file ` + noManager.bin("manager") + ": run make build); " +
				"the local cluster runs only: etcd as quay.io/coreos/etcd:vX.Y.Z, gcr.io/etcd-development/etcd:vX.Y.Z, " +
				"registry.k8s.io/etcd:X.Y.Z-0 or etcd:vX.Y.Z (versions in " + noManager.dir + ": v3.5.21, v3.6.0-rc.1, v3.6.16); " +
				"the operator as ghcr.io/etcd-operator/etcd-operator:<any tag> (manager not built: run make build); " +
				"cert-manager as quay.io/jetstack/cert-manager-controller:<tag> (tags in " + noManager.dir + ": v1.17.2); " +
				"kube-apiserver as registry.k8s.io/kube-apiserver:<tag> (tags in " + noManager.dir + ": v1.37.2); " +
				"versitygw as docker.io/versity/versitygw:<tag> (tags in " + noManager.dir + ": v1.8.0); " +
				"OLM as quay.io/operator-framework/olm:<tag> (tags in " + noManager.dir + ": v0.38.0); " +
				"opm as quay.io/operator-framework/opm:<tag> (tags in " + noManager.dir + ": v1.65.0); " +
				"images of files in " + noManager.dir + "/images; " +
				"busybox, alpine, debian and ubuntu on any registry with any tag, with the host's commands",
		},
		{
			"cert-manager", b.table(), "quay.io/jetstack/cert-manager-controller:v1.17.2",
			Image{
				Ref:        "quay.io/jetstack/cert-manager-controller:v1.17.2",
				Binaries:   map[string]string{"cert-manager-controller": b.bin("cert-manager-controller-v1.17.2"), "controller": b.bin("cert-manager-controller-v1.17.2")},
				Entrypoint: []string{b.bin("cert-manager-controller-v1.17.2")},
			}, "",
		},
		{
			"cert-manager tag not built", b.table(), "quay.io/jetstack/cert-manager-controller:v1.0.0", Image{},
			`image "quay.io/jetstack/cert-manager-controller:v1.0.0": no cert-manager v1.0.0 in the local cluster (no file ` + b.bin("cert-manager-controller-v1.0.0") + ")" + known,
		},
		{"cert-manager by digest only", b.table(), "quay.io/jetstack/cert-manager-controller@" + digest, Image{}, "the local cluster runs cert-manager by tag only"},
		{"versitygw", b.table(), "versity/versitygw:v1.8.0", versityGW("versity/versitygw:v1.8.0"), ""},
		{"versitygw on docker.io", b.table(), "docker.io/versity/versitygw:v1.8.0", versityGW("docker.io/versity/versitygw:v1.8.0"), ""},
		{"versitygw with tag and digest", b.table(), "versity/versitygw:v1.8.0@" + digest, versityGW("versity/versitygw:v1.8.0@" + digest), ""},
		{
			"versitygw tag not built", b.table(), "versity/versitygw:v1.7.0", Image{},
			`image "versity/versitygw:v1.7.0": no versitygw v1.7.0 in the local cluster (no file ` + b.bin("versitygw-v1.7.0") + ": run make localcluster-binaries)" + known,
		},
		{"versitygw by digest only", b.table(), "versity/versitygw@" + digest, Image{}, "the local cluster runs versitygw by tag only"},
		{"versitygw on another registry", b.table(), "ghcr.io/versity/versitygw:v1.8.0", Image{}, "ghcr.io/versity/versitygw:v1.8.0 is not an image of the local cluster"},
		{"OLM", b.table(), "quay.io/operator-framework/olm:v0.38.0", olm("quay.io/operator-framework/olm:v0.38.0"), ""},
		{"OLM with tag and digest", b.table(), "quay.io/operator-framework/olm:v0.38.0@" + digest, olm("quay.io/operator-framework/olm:v0.38.0@" + digest), ""},
		{
			"OLM tag not built", b.table(), "quay.io/operator-framework/olm:v0.37.0", Image{},
			`image "quay.io/operator-framework/olm:v0.37.0": no OLM v0.37.0 in the local cluster (no file ` + b.bin("olm-v0.37.0/olm") + ": run make olm-binaries)" + known,
		},
		{"OLM by digest only", b.table(), "quay.io/operator-framework/olm@" + digest, Image{}, "the local cluster runs OLM by tag only"},
		{
			"opm", b.table(), "quay.io/operator-framework/opm:v1.65.0",
			Image{
				Ref:        "quay.io/operator-framework/opm:v1.65.0",
				Binaries:   map[string]string{"opm": b.bin("opm-v1.65.0"), "grpc_health_probe": b.bin("grpc_health_probe-v0.4.47")},
				Entrypoint: []string{b.bin("opm-v1.65.0")},
			}, "",
		},
		{"opm tag not built", b.table(), "quay.io/operator-framework/opm:v1.0.0", Image{}, "no opm v1.0.0 in the local cluster"},
		{"busybox", b.table(), "busybox", host("busybox", b.cmd("sh")), ""},
		{"busybox with tag and registry", b.table(), "docker.io/library/busybox:1.36", host("docker.io/library/busybox:1.36", b.cmd("sh")), ""},
		{"busybox by digest", b.table(), "busybox:1.36@" + digest, host("busybox:1.36@"+digest, b.cmd("sh")), ""},
		{"busybox on another registry", b.table(), "registry.k8s.io/e2e-test-images/busybox:1.36.1-1", host("registry.k8s.io/e2e-test-images/busybox:1.36.1-1", b.cmd("sh")), ""},
		{"alpine", b.table(), "mirror.gcr.io/library/alpine:3.20", host("mirror.gcr.io/library/alpine:3.20", b.cmd("sh")), ""},
		{"debian without bash on the host", b.table(), "debian:bookworm-slim", host("debian:bookworm-slim"), ""},
		{"ubuntu", b.table(), "ubuntu:24.04", host("ubuntu:24.04"), ""},
		{
			"unknown image", b.table(), "nginx:1.27", Image{},
			`image "nginx:1.27": docker.io/library/nginx:1.27 is not an image of the local cluster, which pulls from no registry` + known,
		},
		{"image named like a host image", b.table(), "bitnami/debian-base:12", Image{}, "docker.io/bitnami/debian-base:12 is not an image of the local cluster"},
		{"invalid reference", b.table(), "Busybox", Image{}, `invalid image reference "Busybox": invalid repository name "Busybox"` + known},
		{
			"binDir missing", &Table{binDir: "/nonexistent/bin"}, "quay.io/coreos/etcd:v3.6.16", Image{},
			"(versions in /nonexistent/bin: none); the operator as ghcr.io/etcd-operator/etcd-operator:<any tag> (manager not built: run make build); " +
				"cert-manager as quay.io/jetstack/cert-manager-controller:<tag> (tags in /nonexistent/bin: none)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.table.Resolve(tt.ref)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Resolve(%q) = %+v, want an error containing %q", tt.ref, got, tt.wantErr)
			case strings.HasSuffix(tt.wantErr, known) && err.Error() != tt.wantErr:
				t.Fatalf("error:\n%s\nwant:\n%s", err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error:\n%s\ndoes not contain:\n%s", err, tt.wantErr)
			case tt.wantErr != "":
				return
			}
			if got.path != tt.table.path {
				t.Errorf("path = %q, want the table's %q", got.path, tt.table.path)
			}
			got.path = ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve(%q) =\n%+v\nwant\n%+v", tt.ref, got, tt.want)
			}
		})
	}
}

func TestResolveReadsBinDirEachTime(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, false)
	tbl := b.table()
	if _, err := tbl.Resolve("ghcr.io/etcd-operator/etcd-operator:dev"); err == nil {
		t.Fatal("Resolve succeeded without a manager")
	}
	write(t, b.bin("manager"), 0o755)
	if _, err := tbl.Resolve("ghcr.io/etcd-operator/etcd-operator:dev"); err != nil {
		t.Fatalf("Resolve after make build: %v", err)
	}
	write(t, b.bin("etcd-v3.7.1"), 0o755)
	if _, err := tbl.Resolve("quay.io/coreos/etcd:v3.7.1"); err != nil {
		t.Fatalf("Resolve after building etcd v3.7.1: %v", err)
	}
}

func TestNewTable(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, true)
	tbl := NewTable(b.dir)
	img, err := tbl.Resolve("quay.io/coreos/etcd:v3.6.16")
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Binaries["etcd"]; got != b.bin("etcd-v3.6.16") {
		t.Errorf("etcd = %q", got)
	}
	// Host commands come from the process's PATH.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh in PATH")
	}
	img, err = tbl.Resolve("busybox")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := img.Argv([]string{"sh", "-c", "true"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(argv[0]); err != nil || !strings.HasSuffix(argv[0], "/sh") || !strings.HasSuffix(sh, "/sh") {
		t.Errorf("Argv = %q, LookPath = %q", argv, sh)
	}
}

func TestEtcdVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tag      string
		k8sStyle bool
		want     string
		ok       bool
	}{
		{"v3.6.16", false, "v3.6.16", true},
		{"3.6.16", false, "v3.6.16", true},
		{"v3.6.0-rc.1", false, "v3.6.0-rc.1", true},
		{"v3.6.16-0", false, "v3.6.16-0", true},
		{"3.6.16-0", true, "v3.6.16", true},
		{"3.6.16", true, "v3.6.16", true},
		{"v3.6.16", true, "v3.6.16", true},
		{"3.6.0-rc.1", true, "", false},
		{"latest", false, "", false},
		{"", false, "", false},
		{"v3.6", false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.tag, func(t *testing.T) {
			t.Parallel()
			got, ok := etcdVersion(tt.tag, tt.k8sStyle)
			if got != tt.want || ok != tt.ok {
				t.Errorf("etcdVersion(%q, %v) = %q, %v; want %q, %v", tt.tag, tt.k8sStyle, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCompareVersions(t *testing.T) {
	t.Parallel()
	got := []string{"v3.6.16", "zzz", "v3.6.0", "v3.10.0", "v3.6.0-rc.1", "v3.5.21", "aaa"}
	slices.SortFunc(got, compareVersions)
	want := []string{"v3.5.21", "v3.6.0-rc.1", "v3.6.0", "v3.6.16", "v3.10.0", "aaa", "zzz"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sorted = %q, want %q", got, want)
	}
}
