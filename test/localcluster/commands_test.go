package localcluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCommandFromAVolume: as with a container runtime, a container whose
// command is a file in one of its volumes runs that file (a restored
// member's restore program, which an init container copies into an
// emptyDir), and the image's binaries are on the container's PATH by name,
// as in the real image (that program execs etcdutl). A command path that
// is in no volume and no binary of the image keeps the container waiting,
// its message naming the path. A volume mounted over the directory the
// repository's binaries are in on the host (an emptyDir at /tmp, as OLM's
// Pods have, with the repository cloned under /tmp) hides none of them.
func TestCommandFromAVolume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	// The init container writes a script that runs the etcd image's
	// tools by name; the host has none of them on its PATH.
	const writeScript = `cat > /tools/versions <<'EOF'
#!/bin/sh
set -e
echo "etcdutl is $(command -v etcdutl)"
etcdutl version
etcdctl version
EOF
chmod +x /tools/versions`
	versions := []string{"etcdutl version: 3.6.16", "etcdctl version: 3.6.16"}
	tests := []struct {
		name          string
		command, args []string
		wantLog       []string // lines of a run that succeeded
		wantWaiting   string   // a part of the RunContainerError message
		overBinaries  bool     // a volume at the top directory of the host's bin/
	}{
		{"command-in-the-volume", []string{"/tools/versions"}, nil, versions, "", false},
		{"volume-over-the-binaries", []string{"/tools/versions"}, nil, versions, "", true},
		{"first-arg-in-the-volume", nil, []string{"/tools/versions"}, versions, "", false},
		{
			"command-in-no-volume", []string{"/elsewhere/versions"}, nil, nil,
			`command "/elsewhere/versions" is not in image "quay.io/coreos/etcd:v3.6.16", which has only etcd, etcdctl, etcdutl in the local cluster, nor in a volume of the container`, false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tools := []corev1.VolumeMount{{Name: "tools", MountPath: "/tools"}}
			volumes := []corev1.Volume{{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			mounts := tools
			if tt.overBinaries {
				top := "/" + strings.Split(strings.TrimPrefix(filepath.Join(repoRoot, "bin"), "/"), "/")[0]
				mounts = append(slices.Clone(tools), corev1.VolumeMount{Name: "over", MountPath: top})
				volumes = append(volumes, corev1.Volume{Name: "over", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr(int64(2)),
					InitContainers: []corev1.Container{{
						Name: "tools", Image: "busybox:1.36", Command: []string{"sh", "-c", writeScript}, VolumeMounts: tools,
					}},
					Containers: []corev1.Container{{
						Name: "main", Image: "quay.io/coreos/etcd:v3.6.16", Command: tt.command, Args: tt.args, VolumeMounts: mounts,
					}},
					Volumes: volumes,
				},
			}
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tt.wantWaiting != "" {
				eventually(t, 2*time.Minute, "container main of "+tt.name+" to wait with RunContainerError", func() error {
					p, err := client.CoreV1().Pods(ns).Get(ctx, tt.name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					s := p.Status.ContainerStatuses
					if len(s) == 0 || s[0].State.Waiting == nil || s[0].State.Waiting.Reason != "RunContainerError" {
						return fmt.Errorf("phase %s %s", p.Status.Phase, describeContainers(p))
					}
					if !strings.Contains(s[0].State.Waiting.Message, tt.wantWaiting) {
						t.Fatalf("waiting message %q, want it to contain %q", s[0].State.Waiting.Message, tt.wantWaiting)
					}
					return nil
				})
				return
			}
			var p *corev1.Pod
			eventually(t, 2*time.Minute, "pod "+tt.name+" to end", func() error {
				var err error
				if p, err = client.CoreV1().Pods(ns).Get(ctx, tt.name, metav1.GetOptions{}); err != nil {
					return err
				}
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					return fmt.Errorf("phase %s %s", p.Status.Phase, describeContainers(p))
				}
				return nil
			})
			out := containerLog(t, ns, tt.name, "main")
			if p.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("pod %s: phase %s %s; log:\n%s", tt.name, p.Status.Phase, describeContainers(p), out)
			}
			for _, want := range tt.wantLog {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("the log lacks %q:\n%s", want, out)
				}
			}
			t.Logf("log of %s:\n%s", tt.name, out)
		})
	}
}
