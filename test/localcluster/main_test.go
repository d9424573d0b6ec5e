// Package localcluster_test proves each capability of the local cluster with
// real processes: real control plane, pods run by our node agents, cluster
// DNS, Services, volumes, probes, ServiceAccount tokens, cert-manager, and
// every fault the e2e tests inject.
package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcd-operator/etcd-operator/internal/localcluster"
	"github.com/etcd-operator/etcd-operator/test/support"
)

var (
	env      *support.Env
	client   kubernetes.Interface
	restCfg  *rest.Config
	faults   *localcluster.Faults
	repoRoot string
)

// TestMain starts the local cluster (or reuses the one running from the
// same state directory) and stops it afterwards if it started it.
func TestMain(m *testing.M) {
	e, stop, err := support.Start(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, client, restCfg, faults, repoRoot = e, e.Client, e.Config, e.Faults, e.Root
	code := m.Run()
	stop()
	os.Exit(code)
}

// newNamespace creates a namespace for one test and waits for its default
// ServiceAccount, which pods need.
func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lc-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	eventually(t, time.Minute, "the default ServiceAccount of "+ns.Name, func() error {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return ns.Name
}

func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	support.Eventually(t, timeout, what, check)
}

// busybox is a pod running a shell command with the host's tools.
func busybox(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(2)),
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "busybox:1.36",
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// createPod creates pod in ns and returns it once it runs with an address
// (and is Ready when ready is set).
func createPod(ctx context.Context, t *testing.T, ns string, pod *corev1.Pod, ready bool) *corev1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return waitPod(ctx, t, ns, created.Name, ready)
}

func waitPod(ctx context.Context, t *testing.T, ns, name string, ready bool) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	eventually(t, 2*time.Minute, "pod "+name+" to run", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = p
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s, ip %q, containers %s", p.Status.Phase, p.Status.PodIP, describeContainers(p))
		}
		if ready && !podReady(p) {
			return fmt.Errorf("not ready: %s", describeContainers(p))
		}
		return nil
	})
	return got
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describeContainers(p *corev1.Pod) string {
	var b strings.Builder
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "[%s ready=%v restarts=%d", s.Name, s.Ready, s.RestartCount)
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Running != nil:
			b.WriteString(" running")
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s (%d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		b.WriteString("]")
	}
	if p.Status.Message != "" {
		b.WriteString(" " + p.Status.Message)
	}
	return b.String()
}

// runInPod runs a one-shot pod with script and returns its output once it
// succeeded.
func runInPod(ctx context.Context, t *testing.T, ns, name, script string) string {
	t.Helper()
	pod := busybox(name, script)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	eventually(t, 2*time.Minute, "pod "+name+" to finish", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("phase %s %s", phase, describeContainers(p))
		}
		return nil
	})
	out := containerLog(t, ns, name, "main")
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s failed; output:\n%s", name, out)
	}
	return out
}

func containerLog(_ *testing.T, ns, pod, container string) string {
	return env.ContainerLog(ns, pod, container)
}

func ptr[T any](v T) *T { return &v }

// createClaim creates a ReadWriteOnce claim of the default StorageClass.
func createClaim(ctx context.Context, t *testing.T, ns, name, size string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
