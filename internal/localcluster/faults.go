package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fault actions, injected through the control socket of a running local
// cluster (see Faults) or its CLI (`localcluster fault ACTION ...`).
const (
	// FaultKill kills a container with SIGKILL; it restarts per its pod's
	// restartPolicy.
	FaultKill = "kill"
	// FaultPause stops a container with SIGSTOP.
	FaultPause = "pause"
	// FaultResume continues a paused container with SIGCONT.
	FaultResume = "resume"
	// FaultDeletePod deletes a pod through the API server.
	FaultDeletePod = "delete-pod"
	// FaultWipe removes every file of a pod's volume (its claim's data for
	// a persistentVolumeClaim volume).
	FaultWipe = "wipe"
	// FaultFill fills a pod's volume until writes fail with ENOSPC.
	FaultFill = "fill"
	// FaultFree removes what FaultFill wrote to a pod's volume.
	FaultFree = "free"
	// FaultThrottle holds a container's process to a tenth of a CPU (a
	// cgroup's CPU quota), as a slow or starved machine would: it runs,
	// ten times slower. It lasts until FaultUnthrottle or the process
	// ends.
	FaultThrottle = "throttle"
	// FaultUnthrottle gives a throttled container its CPU back.
	FaultUnthrottle = "unthrottle"
	// FaultCut takes a pod off the network.
	FaultCut = "cut"
	// FaultHeal puts a cut pod back on the network.
	FaultHeal = "heal"
	// FaultStopNode stops a node: its containers die and it turns NotReady.
	FaultStopNode = "stop-node"
	// FaultStartNode starts a stopped node again.
	FaultStartNode = "start-node"
)

// Fault is one fault to inject.
type Fault struct {
	Action    string `json:"action"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	Volume    string `json:"volume,omitempty"`
	Node      string `json:"node,omitempty"`
}

// inject applies a fault to the running cluster.
func (c *Cluster) inject(ctx context.Context, f Fault) error {
	switch f.Action {
	case FaultStopNode, FaultStartNode:
		n, err := c.node(f.Node)
		if err != nil {
			return err
		}
		if f.Action == FaultStopNode {
			n.stop()
			return nil
		}
		return n.start(ctx)
	case FaultDeletePod:
		return c.client.CoreV1().Pods(f.Namespace).Delete(ctx, f.Pod, metav1.DeleteOptions{})
	}
	w, err := c.podWorker(f.Namespace, f.Pod)
	if err != nil {
		return err
	}
	switch f.Action {
	case FaultKill, FaultPause, FaultResume:
		ctr, err := w.findContainer(f.Container)
		if err != nil {
			return err
		}
		sig := map[string]syscall.Signal{FaultKill: syscall.SIGKILL, FaultPause: syscall.SIGSTOP, FaultResume: syscall.SIGCONT}[f.Action]
		if err := ctr.signal(sig); err != nil {
			return err
		}
		if f.Action == FaultPause {
			return ctr.awaitStopped(ctx)
		}
		return nil
	case FaultThrottle, FaultUnthrottle:
		ctr, err := w.findContainer(f.Container)
		if err != nil {
			return err
		}
		ctr.mu.Lock()
		pid, running := ctr.pid, ctr.running
		ctr.mu.Unlock()
		group := filepath.Join(cpuCgroupRoot, "localcluster-"+f.Namespace+"-"+f.Pod+"-"+ctr.spec.Name)
		if f.Action == FaultUnthrottle {
			return unthrottle(group, pid, running)
		}
		if !running {
			return fmt.Errorf("container %s of pod %s/%s is not running", ctr.spec.Name, f.Namespace, f.Pod)
		}
		return throttle(group, pid)
	case FaultCut:
		return w.net.cut(ctx)
	case FaultHeal:
		return w.net.heal(ctx)
	case FaultWipe, FaultFill, FaultFree:
		src, ok := w.volumes.source(f.Volume)
		if !ok {
			return fmt.Errorf("pod %s/%s has no volume %q", f.Namespace, f.Pod, f.Volume)
		}
		switch f.Action {
		case FaultWipe:
			return wipe(src)
		case FaultFill:
			return fill(src)
		}
		return os.RemoveAll(filepath.Join(src, fillFile))
	}
	return fmt.Errorf("unknown fault %q", f.Action)
}

func (c *Cluster) node(name string) (*node, error) {
	for _, n := range c.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

func (c *Cluster) podWorker(namespace, name string) (*podWorker, error) {
	for _, n := range c.nodes {
		if w := n.worker(namespace, name); w != nil {
			return w, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s is not running on any node", namespace, name)
}

// wipe removes the contents of dir, keeping dir.
func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// fillFile is the file fill writes.
const fillFile = "localcluster-fill"

// fill writes a file into dir until the file system is full.
func fill(dir string) error {
	f, err := os.Create(filepath.Join(dir, fillFile))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// serveControl serves faults on the cluster's control socket.
func (c *Cluster) serveControl(ctx context.Context) (io.Closer, error) {
	_ = os.Remove(c.cfg.controlSocket())
	l, err := net.Listen("unix", c.cfg.controlSocket())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.inject(ctx, f); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}

// Faults injects faults into the running local cluster of a state
// directory, through its control socket.
type Faults struct {
	client *http.Client
}

// NewFaults returns a Faults for the local cluster in stateDir.
func NewFaults(stateDir string) *Faults {
	sock := filepath.Join(stateDir, "control.sock")
	return &Faults{client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}}
}

// Inject applies f and returns once it has taken effect.
func (f *Faults) Inject(ctx context.Context, fault Fault) error {
	body, err := json.Marshal(fault)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localcluster/faults", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the local cluster's control socket: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("fault %s: %s", fault.Action, bytes.TrimSpace(msg))
	}
	return nil
}

// cleanupThrottles removes the cgroups of throttled containers that
// ended throttled.
func cleanupThrottles() {
	groups, _ := filepath.Glob(filepath.Join(cpuCgroupRoot, "localcluster-*"))
	for _, g := range groups {
		_ = os.Remove(g) // fails only while a process is in it
	}
}

// cpuCgroupRoot is the cgroup v1 CPU controller's hierarchy, where the
// node agents run every container: throttling needs it (this machine
// mounts cgroup v1 controllers, with cgroup v2 unified beside them).
const cpuCgroupRoot = "/sys/fs/cgroup/cpu"

// throttleQuota is the CPU time a throttled process gets per 100 ms.
const throttleQuota = "10000"

// throttle moves process pid into the cgroup group, limited to a tenth
// of a CPU.
func throttle(group string, pid int) error {
	if err := os.MkdirAll(group, 0o755); err != nil {
		return fmt.Errorf("throttling needs the cgroup v1 CPU controller at %s: %w", cpuCgroupRoot, err)
	}
	for file, value := range map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": throttleQuota, "cgroup.procs": strconv.Itoa(pid)} {
		if err := os.WriteFile(filepath.Join(group, file), []byte(value), 0o644); err != nil {
			return fmt.Errorf("throttling process %d: %w", pid, err)
		}
	}
	return nil
}

// unthrottle moves every process in group back to the root cgroup (where
// every container runs) and removes group. Every process, not only pid:
// one the container started after it was throttled is in the group too,
// and the group cannot be removed while it holds one (TestFaultThrottle
// once failed with "device or resource busy"). A process that exits
// meanwhile may hold the group for a moment longer, so the removal is
// tried again for up to a second.
func unthrottle(group string, pid int, running bool) error {
	if running {
		if err := os.WriteFile(filepath.Join(cpuCgroupRoot, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("unthrottling process %d: %w", pid, err)
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		procs, err := os.ReadFile(filepath.Join(group, "cgroup.procs"))
		if os.IsNotExist(err) {
			return nil
		}
		for _, p := range strings.Fields(string(procs)) {
			// One that exited meanwhile needs no moving.
			_ = os.WriteFile(filepath.Join(cpuCgroupRoot, "cgroup.procs"), []byte(p), 0o644)
		}
		err = os.Remove(group)
		if err == nil || os.IsNotExist(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s (processes in it: %s): %w", group, strings.Join(strings.Fields(string(procs)), ", "), err)
		}
		time.Sleep(20 * time.Millisecond) // the kernel gives no event to wait on
	}
}
