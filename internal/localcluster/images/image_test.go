package images

import (
	"reflect"
	"testing"
)

func TestArgv(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, true)
	resolve := func(ref string) Image {
		img, err := b.table().Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	etcd := resolve("quay.io/coreos/etcd:v3.6.16")
	etcdAlone := resolve("registry.k8s.io/etcd:3.5.21-0")
	operator := resolve("ghcr.io/etcd-operator/etcd-operator:v0.1.0")
	certManager := resolve("quay.io/jetstack/cert-manager-controller:v1.17.2")
	apiserver := resolve("registry.k8s.io/kube-apiserver:v1.37.2")
	busybox := resolve("busybox:1.36")
	debian := resolve("debian:12")
	tests := []struct {
		name          string
		image         Image
		command, args []string
		want          []string
		wantErr       string
	}{
		{"etcd command and args", etcd, []string{"etcd", "--name=etcd-0"}, []string{"--data-dir=/d"}, []string{b.bin("etcd-v3.6.16"), "--name=etcd-0", "--data-dir=/d"}, ""},
		{"etcd by its path in the image", etcd, []string{"/usr/local/bin/etcd"}, nil, []string{b.bin("etcd-v3.6.16")}, ""},
		{"etcdctl", etcd, []string{"etcdctl", "endpoint", "health"}, nil, []string{b.bin("etcdctl-v3.6.16"), "endpoint", "health"}, ""},
		{"etcdutl", etcd, []string{"/usr/local/bin/etcdutl", "version"}, nil, []string{b.bin("etcdutl-v3.6.16"), "version"}, ""},
		{"etcd default command", etcd, nil, nil, []string{b.bin("etcd-v3.6.16")}, ""},
		{"etcd args are the command line without an entrypoint", etcd, nil, []string{"etcd", "--name=x"}, []string{b.bin("etcd-v3.6.16"), "--name=x"}, ""},
		{
			"etcd flags alone are no command", etcd, nil, []string{"--name=x"}, nil,
			`command "--name=x" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster`,
		},
		{
			"no shell in the etcd image", etcd, []string{"/bin/sh", "-c", "etcd"}, nil, nil,
			`command "/bin/sh" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster, nor in a volume of the container`,
		},
		{
			"etcdctl not built for that version", etcdAlone, []string{"etcdctl"}, nil, nil,
			`command "etcdctl" is not in image "registry.k8s.io/etcd:3.5.21-0", which has only etcd in the local cluster`,
		},
		{"operator command", operator, []string{"/manager"}, []string{"--leader-elect"}, []string{b.bin("manager"), "--leader-elect"}, ""},
		{"operator args after the entrypoint", operator, nil, []string{"--leader-elect"}, []string{b.bin("manager"), "--leader-elect"}, ""},
		{"operator entrypoint", operator, nil, nil, []string{b.bin("manager")}, ""},
		{
			"cert-manager args after the entrypoint", certManager, nil, []string{"--v=2", "--cluster-resource-namespace=cert-manager"},
			[]string{b.bin("cert-manager-controller-v1.17.2"), "--v=2", "--cluster-resource-namespace=cert-manager"}, "",
		},
		{"cert-manager by the image's path", certManager, []string{"/app/cmd/controller/controller"}, []string{"--v=2"}, []string{b.bin("cert-manager-controller-v1.17.2"), "--v=2"}, ""},
		{"kube-apiserver command", apiserver, []string{"kube-apiserver", "--etcd-prefix=/a/"}, nil, []string{b.bin("kube-apiserver-v1.37.2"), "--etcd-prefix=/a/"}, ""},
		{"kube-apiserver by its path in the image", apiserver, []string{"/usr/local/bin/kube-apiserver"}, nil, []string{b.bin("kube-apiserver-v1.37.2")}, ""},
		{"host shell", busybox, []string{"sh", "-c", "sleep 1"}, nil, []string{b.cmd("sh"), "-c", "sleep 1"}, ""},
		{"host command by its path in the image", busybox, []string{"/bin/sleep"}, []string{"3600"}, []string{b.cmd("sleep"), "3600"}, ""},
		{"host command from args", busybox, nil, []string{"cat", "/etc/hostname"}, []string{b.cmd("cat"), "/etc/hostname"}, ""},
		{"host default command", busybox, nil, nil, []string{b.cmd("sh")}, ""},
		{"host command missing", busybox, []string{"wget", "-q"}, nil, nil, `command "wget" of image "busybox:1.36" is not in the host's PATH`},
		{"host file not executable", busybox, []string{"noexec"}, nil, nil, `command "noexec" of image "busybox:1.36" is not in the host's PATH`},
		{"host default command missing", debian, nil, nil, nil, `image "debian:12" has no default command in the local cluster: give the container a command`},
		{"empty command name", busybox, []string{""}, nil, nil, `empty command name for image "busybox:1.36"`},
		{"empty image", Image{Ref: "x"}, []string{"x"}, nil, nil, `command "x" is not in image "x", which has no commands in the local cluster`},
		{"relative PATH entries skipped", Image{Ref: "alpine", HostCommands: true, path: "bin:."}, []string{"sh"}, nil, nil, `command "sh" of image "alpine" is not in the host's PATH`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.image.Argv(tt.command, tt.args, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("Argv() = %q, %v; want error %q", got, err, tt.wantErr)
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("Argv() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestArgvRunsFilesOfVolumes: a command that is an absolute path in one of
// the container's volumes runs as is (the restore program an init
// container copied into an emptyDir); any other stays resolved through the
// image.
func TestArgvRunsFilesOfVolumes(t *testing.T) {
	t.Parallel()
	b := newTestBin(t, true)
	resolve := func(ref string) Image {
		img, err := b.table().Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	etcd := resolve("quay.io/coreos/etcd:v3.6.16")
	operator := resolve("ghcr.io/etcd-operator/etcd-operator:v0.1.0")
	busybox := resolve("busybox:1.36")
	restore := []string{"/var/lib/etcd", "/etcd-restore"}
	tests := []struct {
		name          string
		image         Image
		command, args []string
		volumes       []string
		want          []string
		wantErr       string
	}{
		{
			"command in a volume", etcd, []string{"/etcd-restore/etcd-restore"}, []string{"--data-dir=/var/lib/etcd"}, restore,
			[]string{"/etcd-restore/etcd-restore", "--data-dir=/var/lib/etcd"}, "",
		},
		{"command deeper in a volume", etcd, []string{"/etcd-restore/bin/run"}, nil, restore, []string{"/etcd-restore/bin/run"}, ""},
		{"command in a volume mounted at a trailing slash", etcd, []string{"/tools/run"}, nil, []string{"/tools/"}, []string{"/tools/run"}, ""},
		{"a file mounted by subPath", etcd, []string{"/usr/local/bin/run.sh"}, nil, []string{"/usr/local/bin/run.sh"}, []string{"/usr/local/bin/run.sh"}, ""},
		{"first arg in a volume without command or entrypoint", etcd, nil, []string{"/etcd-restore/etcd-restore", "-v"}, restore, []string{"/etcd-restore/etcd-restore", "-v"}, ""},
		{"the volume shadows the image's binary", etcd, []string{"/etcd-restore/etcdutl"}, nil, restore, []string{"/etcd-restore/etcdutl"}, ""},
		{"host command image", busybox, []string{"/scripts/run.sh", "x"}, nil, []string{"/scripts"}, []string{"/scripts/run.sh", "x"}, ""},
		{"an arg after the entrypoint is no command", operator, nil, []string{"/etcd-restore/etcd-restore"}, restore, []string{b.bin("manager"), "/etcd-restore/etcd-restore"}, ""},
		{"an image binary in no volume", etcd, []string{"/usr/local/bin/etcdutl", "version"}, nil, restore, []string{b.bin("etcdutl-v3.6.16"), "version"}, ""},
		{"a name, not a path", etcd, []string{"etcdctl"}, nil, []string{"/"}, []string{b.bin("etcdctl-v3.6.16")}, ""},
		{"a relative path is not in a volume", etcd, []string{"etcd-restore/etcdutl"}, nil, restore, []string{b.bin("etcdutl-v3.6.16")}, ""},
		{"a volume mounted at the root", etcd, []string{"/x/run"}, nil, []string{"/"}, []string{"/x/run"}, ""},
		{"cleaned out of the volume", etcd, []string{"/etcd-restore/../usr/local/bin/etcd"}, nil, restore, []string{b.bin("etcd-v3.6.16")}, ""},
		{
			"beside a volume, not in it", etcd, []string{"/etcd-restore-2/run"}, nil, restore, nil,
			`command "/etcd-restore-2/run" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster, nor in a volume of the container`,
		},
		{
			"in no volume and no binary", etcd, []string{"/nowhere/run"}, nil, restore, nil,
			`command "/nowhere/run" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster, nor in a volume of the container`,
		},
		{
			"no volumes", etcd, []string{"/etcd-restore/etcd-restore"}, nil, nil, nil,
			`command "/etcd-restore/etcd-restore" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster, nor in a volume of the container`,
		},
		{
			"host command image, in no volume", busybox, []string{"/scripts/run.sh"}, nil, []string{"/data"}, nil,
			`command "/scripts/run.sh" of image "busybox:1.36" is not in the host's PATH, nor in a volume of the container`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.image.Argv(tt.command, tt.args, tt.volumes)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("Argv() = %q, %v; want error %q", got, err, tt.wantErr)
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("Argv() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestArgvDoesNotShareTheImagesSlices(t *testing.T) {
	t.Parallel()
	img := Image{Ref: "x", Entrypoint: []string{"/bin/x"}, Cmd: []string{"--default"}}
	argv, err := img.Argv(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	argv[0], argv[1] = "changed", "changed"
	if img.Entrypoint[0] != "/bin/x" || img.Cmd[0] != "--default" {
		t.Errorf("image changed through Argv's result: %+v", img)
	}
	img = Image{Ref: "y", Cmd: []string{"/bin/y"}}
	argv, _ = img.Argv(nil, nil, nil)
	argv[0] = "changed"
	if img.Cmd[0] != "/bin/y" {
		t.Errorf("image changed through Argv's result: %+v", img)
	}
}
