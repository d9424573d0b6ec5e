// Package support is what the suites that run on the local cluster share:
// starting (or reusing) the cluster, clients, and polling.
package support

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-operator/etcd-operator/internal/localcluster"
)

// Env is a running local cluster and clients for it.
type Env struct {
	Root     string // the repository
	StateDir string
	Config   *rest.Config
	Client   kubernetes.Interface
	Faults   *localcluster.Faults
	Network  localcluster.Network // the machine's network the cluster runs on
}

// Kubeconfig is the path of the cluster's admin kubeconfig.
func (e *Env) Kubeconfig() string { return filepath.Join(e.StateDir, "admin.kubeconfig") }

// Bin is the path of a binary built into bin/.
func (e *Env) Bin(name string) string { return filepath.Join(e.Root, "bin", name) }

// Start starts the local cluster from the repository at root, or reuses the
// one running from the same state directory ($LOCALCLUSTER_STATE, default
// <root>/.localcluster; one it starts runs on $LOCALCLUSTER_NETWORK,
// default 0). The returned stop function stops it if Start
// started it, unless $LOCALCLUSTER_KEEP is set.
func Start(root string) (*Env, func(), error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	env := &Env{Root: root, StateDir: os.Getenv("LOCALCLUSTER_STATE")}
	if env.StateDir == "" {
		env.StateDir = filepath.Join(root, ".localcluster")
	}
	bin := env.Bin("localcluster")
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("%s is missing: run the tests with `make test`, which builds the local cluster", bin)
	}
	stop := func() {}
	if _, running := localcluster.RunningPid(env.StateDir); !running {
		up := exec.Command(bin, "up", "--detach", "--state-dir", env.StateDir, "--bin-dir", filepath.Join(root, "bin"), "--nodes", "3",
			"--network", cmp.Or(os.Getenv("LOCALCLUSTER_NETWORK"), "0"))
		up.Stdout, up.Stderr = os.Stdout, os.Stderr
		if err := up.Run(); err != nil {
			return nil, nil, fmt.Errorf("starting the local cluster: %w", err)
		}
		if os.Getenv("LOCALCLUSTER_KEEP") == "" {
			stop = func() {
				down := exec.Command(bin, "down", "--state-dir", env.StateDir)
				down.Stdout, down.Stderr = os.Stdout, os.Stderr
				_ = down.Run()
			}
		}
	}
	if env.Config, err = clientcmd.BuildConfigFromFlags("", env.Kubeconfig()); err != nil {
		stop()
		return nil, nil, err
	}
	// One client serves every test running at once, each polling what it
	// waits for: client-go's default (5 requests a second) made them wait
	// on each other, not on the cluster.
	env.Config.QPS, env.Config.Burst = 100, 200
	if env.Client, err = kubernetes.NewForConfig(env.Config); err != nil {
		stop()
		return nil, nil, err
	}
	if env.Network, err = localcluster.ReadNetwork(env.StateDir); err != nil {
		stop()
		return nil, nil, err
	}
	env.Faults = localcluster.NewFaults(env.StateDir)
	return env, stop, nil
}

// ContainerLog reads every run's log of a container from the node agents'
// pod directories: unlike `kubectl logs`, it has the runs before the
// previous one and the Pods already deleted.
func (e *Env) ContainerLog(ns, pod, container string) string {
	pods, _ := filepath.Glob(filepath.Join(e.StateDir, "pods", ns+"_"+pod+"_*"))
	var out bytes.Buffer
	for _, dir := range pods {
		for _, m := range localcluster.ContainerLogFiles(dir, container) {
			data, _ := os.ReadFile(m)
			out.Write(data)
		}
	}
	return out.String()
}

// Eventually polls check until it returns nil, or fails the test after
// timeout saying what it waited for and the last error.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
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

// ReadObjects reads every YAML document of a file.
func ReadObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

// InstallCertManager installs cert-manager as the demo does
// (hack/localcluster/install-cert-manager.sh) and waits until it runs.
func (e *Env) InstallCertManager() error {
	install := exec.Command(filepath.Join(e.Root, "hack", "localcluster", "install-cert-manager.sh"), e.Bin("kubectl-v1.37.2"))
	install.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig())
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("installing cert-manager: %w\n%s", err, out)
	}
	return nil
}

// InstallOperator installs the operator from config/default with
// server-side apply, as the README tells users, restarts it so it runs the
// binary in bin/, and waits until it runs.
func (e *Env) InstallOperator() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`set -euo pipefail
%[2]s build %[3]s/config/default | %[1]s apply --server-side --force-conflicts -f -
%[1]s -n etcd-operator-system rollout restart deployment/etcd-operator-controller-manager
%[1]s -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=150s`,
		e.Bin("kubectl-v1.37.2"), e.Bin("kustomize-v5.8.2"), e.Root)
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("installing the operator from config/default: %w\n%s", err, out)
	}
	return nil
}

// DumpOnFailure registers a t.Cleanup (call it after the namespace's
// deletion is registered, so it runs first) that prints what a failed
// test leaves behind in ns: every Pod with its phase and container states,
// the tail of each container's log, and the operator's log lines about ns.
func (e *Env) DumpOnFailure(t testing.TB, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("dump of %s: %v", ns, err)
			return
		}
		for _, p := range pods.Items {
			t.Logf("dump: pod %s/%s on %s, %s, IP %s, deleting=%v", ns, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.DeletionTimestamp != nil)
			for _, cs := range p.Status.ContainerStatuses {
				t.Logf("dump:   container %s ready=%v restarts=%d state=%+v last=%+v", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
				t.Logf("dump:   log of %s/%s:\n%s", p.Name, cs.Name, tail(e.ContainerLog(ns, p.Name, cs.Name), 25))
			}
		}
		var operator bytes.Buffer
		for line := range strings.Lines(e.ContainerLog("etcd-operator-system", "*", "manager")) {
			if strings.Contains(line, ns) {
				operator.WriteString(line)
			}
		}
		t.Logf("dump: the operator about %s:\n%s", ns, tail(operator.String(), 60))
	})
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// Main is the TestMain of a suite that runs on the local cluster with the
// operator installed: it starts (or reuses) the cluster from the
// repository at root, installs cert-manager, then the operator (it looks
// for cert-manager's API when it starts), hands the suite its Env and a
// client through use, runs the tests and exits with their code.
func Main(m *testing.M, root string, use func(*Env, client.Client)) {
	Run(m, root, Scheme(), func(e *Env, c client.Client) error {
		use(e, c)
		if err := e.InstallCertManager(); err != nil {
			return err
		}
		return e.InstallOperator()
	})
}

// Run is the TestMain of a suite that runs on the local cluster: it
// starts (or reuses) the cluster from the repository at root, hands setup
// its Env and a client of scheme, runs the tests once setup succeeds,
// stops the cluster if it started it, and exits with the tests' code.
func Run(m *testing.M, root string, scheme *runtime.Scheme, setup func(*Env, client.Client) error) {
	flag.Parse()
	takeParallelBound()
	e, stop, err := Start(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code, err := func() (int, error) {
		c, err := client.New(e.Config, client.Options{Scheme: scheme})
		if err != nil {
			return 0, err
		}
		if err := setup(e, c); err != nil {
			return 0, err
		}
		return m.Run(), nil
	}()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}
