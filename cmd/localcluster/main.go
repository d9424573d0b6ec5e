// Command localcluster runs the project's local Kubernetes cluster: a real
// control plane plus node agents that run pods as isolated host processes.
//
//	localcluster up [--detach] [--nodes N] [--network N]
//	                                         start it (foreground, or in the background)
//	localcluster down                        stop it and remove what it created
//	localcluster fault ACTION [flags]        inject a fault (kill, pause, resume, throttle,
//	                                         unthrottle, delete-pod, wipe, fill, free, cut,
//	                                         heal, stop-node, start-node)
//	localcluster kubeconfig                  print the admin kubeconfig's path
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/etcd-operator/etcd-operator/internal/localcluster"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == localcluster.ShimCommand {
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: localcluster shim SPEC")
			os.Exit(2)
		}
		err := localcluster.RunShim(os.Args[2])
		fmt.Fprintf(os.Stderr, "localcluster shim: %v\n", err)
		os.Exit(127)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: localcluster up|down|fault|kubeconfig [flags]; see the package documentation")
	}
	fs := flag.NewFlagSet(args[0], flag.ExitOnError)
	stateDir := fs.String("state-dir", ".localcluster", "Directory for everything the cluster writes.")
	binDir := fs.String("bin-dir", "bin", "Directory of the binaries built by the Makefile.")
	nodes := fs.Int("nodes", 3, "Number of nodes.")
	network := fs.Int("network", 0, fmt.Sprintf("Which of the machine's local-cluster networks to run on, 0 to %d: clusters on different networks run side by side (network N: pods on 10.(213+2N).0.0/16, Services on 10.(214+2N).0.0/16, bridge lcbrN).", localcluster.MaxNetwork))
	kubeVersion := fs.String("kubernetes-version", "v1.37.2", "Version of the kube-* binaries in --bin-dir.")
	etcdVersion := fs.String("etcd-version", "v3.6.16", "Version of the control plane's etcd in --bin-dir.")
	detach := fs.Bool("detach", false, "Run in the background and return once the cluster is ready.")
	timeout := fs.Duration("timeout", 3*time.Minute, "How long up --detach and down wait.")
	f := localcluster.Fault{}
	fs.StringVar(&f.Namespace, "namespace", "default", "Namespace of the pod (fault).")
	fs.StringVar(&f.Pod, "pod", "", "Pod (fault).")
	fs.StringVar(&f.Container, "container", "", "Container; empty means the pod's first (fault).")
	fs.StringVar(&f.Volume, "volume", "", "Volume of the pod (wipe, fill, free).")
	fs.StringVar(&f.Node, "node", "", "Node (stop-node, start-node).")
	flagArgs := args[1:]
	if args[0] == "fault" && len(args) > 1 {
		f.Action, flagArgs = args[1], args[2:]
	}
	klog.InitFlags(fs)
	if err := fs.Parse(flagArgs); err != nil {
		return err
	}
	state, err := filepath.Abs(*stateDir)
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*binDir)
	if err != nil {
		return err
	}
	cfg := localcluster.Config{StateDir: state, BinDir: bin, Nodes: *nodes, KubernetesVersion: *kubeVersion, EtcdVersion: *etcdVersion, Network: localcluster.Network(*network)}

	switch args[0] {
	case "up":
		if *detach {
			return upDetached(args[1:], cfg, *timeout)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return localcluster.Run(ctx, cfg, nil)
	case "down":
		return down(cfg, *timeout)
	case "fault":
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		return localcluster.NewFaults(state).Inject(ctx, f)
	case "kubeconfig":
		fmt.Println(cfg.Kubeconfig())
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// upDetached starts `localcluster up` in its own session, logging next to
// the state directory, and waits until the cluster is ready.
func upDetached(args []string, cfg localcluster.Config, timeout time.Duration) error {
	var rest []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" {
			rest = append(rest, a)
		}
	}
	if pid, ok := localcluster.RunningPid(cfg.StateDir); ok {
		fmt.Printf("Local cluster is already running (pid %d).\nexport KUBECONFIG=%s\n", pid, cfg.Kubeconfig())
		return nil
	}
	_ = os.Remove(filepath.Join(cfg.StateDir, "ready"))
	logPath := cfg.StateDir + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"up"}, rest...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := localcluster.WaitReady(ctx, cfg.StateDir, exited); err != nil {
		return fmt.Errorf("%w; log: %s", err, logPath)
	}
	fmt.Printf("Local cluster is up (pid %d, log %s).\nexport KUBECONFIG=%s\n", cmd.Process.Pid, logPath, cfg.Kubeconfig())
	return nil
}

// down stops the local cluster of the state directory and waits until it
// has removed what it created.
func down(cfg localcluster.Config, timeout time.Duration) error {
	pid, ok := localcluster.RunningPid(cfg.StateDir)
	if !ok {
		fmt.Println("No local cluster is running from", cfg.StateDir)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		fmt.Println("No local cluster is running from", cfg.StateDir)
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		if _, alive := localcluster.RunningPid(cfg.StateDir); !alive {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("the local cluster (pid %d) did not stop within %s; killed it, the next `up` cleans up", pid, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Println("Local cluster stopped")
	return nil
}
