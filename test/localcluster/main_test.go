// Package localcluster_test proves each capability of the local cluster with
// real processes: real control plane, pods run by our node agents, cluster
// DNS, Services, volumes, probes, ServiceAccount tokens, cert-manager, and
// every fault the e2e tests inject.
package localcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-operator/etcd-operator/internal/localcluster"
)

var (
	client   kubernetes.Interface
	restCfg  *rest.Config
	faults   *localcluster.Faults
	repoRoot string
)

// TestMain starts the local cluster (or reuses the one running from the
// same state directory) and stops it afterwards if it started it.
func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return 0, err
	}
	repoRoot = root
	state := os.Getenv("LOCALCLUSTER_STATE")
	if state == "" {
		state = filepath.Join(root, ".localcluster")
	}
	bin := filepath.Join(root, "bin", "localcluster")
	if _, err := os.Stat(bin); err != nil {
		return 0, fmt.Errorf("%s is missing: run the tests with `make test`, which builds the local cluster", bin)
	}
	started := false
	if _, err := os.Stat(filepath.Join(state, "ready")); err != nil {
		up := exec.Command(bin, "up", "--detach", "--state-dir", state, "--bin-dir", filepath.Join(root, "bin"), "--nodes", "3")
		up.Stdout, up.Stderr = os.Stdout, os.Stderr
		if err := up.Run(); err != nil {
			return 0, fmt.Errorf("starting the local cluster: %w", err)
		}
		started = true
	}
	if started && os.Getenv("LOCALCLUSTER_KEEP") == "" {
		defer func() {
			down := exec.Command(bin, "down", "--state-dir", state)
			down.Stdout, down.Stderr = os.Stdout, os.Stderr
			_ = down.Run()
		}()
	}
	restCfg, err = clientcmd.BuildConfigFromFlags("", filepath.Join(state, "admin.kubeconfig"))
	if err != nil {
		return 0, err
	}
	client, err = kubernetes.NewForConfig(restCfg)
	if err != nil {
		return 0, err
	}
	faults = localcluster.NewFaults(state)
	return m.Run(), nil
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

// eventually polls check until it returns nil, or fails the test after
// timeout saying what it waited for and the last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
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

// containerLog reads a container's log from the node agent's pod directory
// (the local cluster serves no kubelet API for `kubectl logs`).
func containerLog(t *testing.T, ns, pod, container string) string {
	t.Helper()
	state := os.Getenv("LOCALCLUSTER_STATE")
	if state == "" {
		state = filepath.Join(repoRoot, ".localcluster")
	}
	matches, _ := filepath.Glob(filepath.Join(state, "pods", ns+"_"+pod+"_*", container+".log"))
	var out bytes.Buffer
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		out.Write(data)
	}
	return out.String()
}

func ptr[T any](v T) *T { return &v }
