package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTerminationMessage: as a kubelet does, the node agent binds a file
// of its own at each container's terminationMessagePath and reports what
// the container wrote there as state.terminated.message; with
// FallbackToLogsOnError, a failed container that wrote none gets the tail
// of its log.
func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	// After the subtests: the default path is in each container's own
	// /dev, never a file made in the host's.
	t.Cleanup(func() {
		if _, err := os.Stat("/dev/termination-log"); !os.IsNotExist(err) {
			t.Errorf("the host has a /dev/termination-log (%v): a container's file was made on the host", err)
		}
	})
	var last80 strings.Builder
	for i := 21; i <= 100; i++ {
		fmt.Fprintf(&last80, "line %d\n", i)
	}
	const (
		file     = corev1.TerminationMessageReadFile
		fallback = corev1.TerminationMessageFallbackToLogsOnError
	)
	tests := []struct {
		name     string
		script   string
		path     string // terminationMessagePath; empty: the default
		policy   corev1.TerminationMessagePolicy
		exitCode int32
		reason   string
		want     string
	}{
		{"writes-and-exits", `echo working; printf '{"revision":42,"sha256":"ab"}' > /dev/termination-log`, "", file, 0, "Completed", `{"revision":42,"sha256":"ab"}`},
		{"own-path", `echo 'bad config' > /tmp/result; exit 3`, "/tmp/result", file, 3, "Error", "bad config\n"},
		{"no-message", `echo failing; exit 1`, "", file, 1, "Error", ""},
		{"killed", `kill -KILL 0`, "", file, 137, "Error", "killed by killed"}, // its process group: itself
		{"fallback-to-log", `i=1; while [ $i -le 100 ]; do echo "line $i"; i=$((i+1)); done; exit 2`, "", fallback, 2, "Error", last80.String()},
		{"fallback-file-first", `echo noise; printf written > /dev/termination-log; exit 2`, "", fallback, 2, "Error", "written"},
		{"fallback-not-on-success", `echo all good`, "", fallback, 0, "Completed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pod := busybox(tt.name, tt.script)
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod.Spec.Containers[0].TerminationMessagePath = tt.path
			pod.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var term *corev1.ContainerStateTerminated
			eventually(t, 2*time.Minute, "pod "+tt.name+" to end", func() error {
				p, err := client.CoreV1().Pods(ns).Get(ctx, tt.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					return fmt.Errorf("phase %s %s", p.Status.Phase, describeContainers(p))
				}
				term = p.Status.ContainerStatuses[0].State.Terminated
				return nil
			})
			if term == nil {
				t.Fatal("the pod ended without a terminated container")
			}
			if term.ExitCode != tt.exitCode || term.Reason != tt.reason || term.Message != tt.want {
				t.Errorf("terminated: exit code %d, reason %s, message %q; want %d, %s, %q\nlog:\n%s",
					term.ExitCode, term.Reason, term.Message, tt.exitCode, tt.reason, tt.want, containerLog(t, ns, tt.name, "main"))
			}
		})
	}

	t.Run("restart", func(t *testing.T) {
		t.Parallel()
		// Each run sees an empty file, writes "run N" to it; the first
		// fails, the second stays.
		pod := busybox("restarts", `echo "size at start: $(wc -c < /dev/termination-log)"
n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n
printf "run $n" > /dev/termination-log
[ $n -ge 2 ] && exec sleep 600
exit 1`)
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the second run, with the first's message as lastState", func() error {
			p, err := client.CoreV1().Pods(ns).Get(ctx, "restarts", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := p.Status.ContainerStatuses
			if len(s) == 0 || s[0].RestartCount != 1 || s[0].State.Running == nil || s[0].LastTerminationState.Terminated == nil {
				return fmt.Errorf("containers: %s", describeContainers(p))
			}
			if got := s[0].LastTerminationState.Terminated.Message; got != "run 1" {
				t.Fatalf("lastState.terminated.message = %q, want %q", got, "run 1")
			}
			return nil
		})
		eventually(t, 30*time.Second, "the second run's first line", func() error {
			out := containerLog(t, ns, "restarts", "main")
			if strings.Count(out, "size at start: ") < 2 {
				return fmt.Errorf("log: %q", out)
			}
			if strings.Count(out, "size at start: 0\n") != 2 {
				t.Fatalf("a run started with a termination log that was not empty:\n%s", out)
			}
			return nil
		})
	})
}
