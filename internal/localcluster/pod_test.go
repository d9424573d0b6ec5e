package localcluster

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContainerEnv: the image's binaries come first on PATH unless the
// container sets its own PATH, and a container's variable replaces the
// base one of the same name instead of following it.
func TestContainerEnv(t *testing.T) {
	t.Parallel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0"}}
	rest := []string{
		"HOSTNAME=etcd-0",
		"HOME=/root",
		"KUBERNETES_SERVICE_HOST=10.216.0.1",
		"KUBERNETES_SERVICE_PORT=443",
		"KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.216.0.1:443",
	}
	with := func(first string, more ...string) []string {
		return append(append([]string{first}, rest...), more...)
	}
	tests := []struct {
		name          string
		imageBinaries bool
		env           []string
		want          []string
	}{
		{
			"image binaries first on PATH", true, []string{"ETCDCTL_API=3"},
			with("PATH=/localcluster-image-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ETCDCTL_API=3"),
		},
		{"no image binaries", false, nil, with("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")},
		{"the container's PATH wins", true, []string{"PATH=/opt/bin:/bin"}, with("PATH=/opt/bin:/bin")},
		{
			"the container's HOME wins, in place", false, []string{"A=1", "HOME=/home/etcd"},
			append(append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=etcd-0", "HOME=/home/etcd"}, rest[2:]...), "A=1"),
		},
		{"an empty PATH is the container's too", true, []string{"PATH="}, with("PATH=")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := mergeEnv(baseEnv(pod, 1, tt.imageBinaries), tt.env); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("environment:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestMergeEnvLeavesBaseAlone(t *testing.T) {
	t.Parallel()
	base := []string{"A=1", "B=2"}
	if got, want := mergeEnv(base, []string{"A=3", "C=4"}), []string{"A=3", "B=2", "C=4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
	if base[0] != "A=1" {
		t.Errorf("base changed: %q", base)
	}
}

func TestMountPaths(t *testing.T) {
	t.Parallel()
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/etcd"},
		{Name: "restore", MountPath: "/etcd-restore"},
		{Name: "script", MountPath: "/usr/local/bin/run.sh", SubPath: "run.sh"},
	}}
	if got, want := mountPaths(c), []string{"/var/lib/etcd", "/etcd-restore", "/usr/local/bin/run.sh"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mountPaths = %q, want %q", got, want)
	}
}
