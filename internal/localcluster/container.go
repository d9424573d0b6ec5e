package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Restart back-off: a container that keeps failing waits 1 s, then twice as
// long each time, up to a minute (a kubelet starts at 10 s and stops at
// 5 minutes; the local cluster is for tests). Ten minutes of running resets
// it.
const (
	backoffInitial = time.Second
	backoffMax     = time.Minute
	backoffReset   = 10 * time.Minute
)

// container is one container of a pod: its current process, if any, and
// what a kubelet remembers about it.
type container struct {
	spec   corev1.Container
	isInit bool
	logDir string // one file per run, as a kubelet keeps them: <run>.log
	// termLog is the host file bound at the container's
	// terminationMessagePath, emptied at each start.
	termLog string

	mu           sync.Mutex
	pid          int
	startedAt    time.Time
	exited       chan struct{} // closed when the current process exits
	running      bool
	restartCount int32
	lastExit     *corev1.ContainerStateTerminated // the last process's end
	waiting      corev1.ContainerStateWaiting     // why it is not running
	backoff      time.Duration
	nextStart    time.Time
	ready        bool // readiness probe result
	started      bool // startup probe result
	probeCancel  context.CancelFunc
	killReason   string // why the agent stopped it, if it did
	imageID      string
}

func newContainer(spec corev1.Container, isInit bool, podDir string) *container {
	return &container{
		spec:    spec,
		isInit:  isInit,
		logDir:  filepath.Join(podDir, "logs", spec.Name),
		termLog: terminationLog(podDir, spec.Name),
		waiting: corev1.ContainerStateWaiting{Reason: "ContainerCreating"},
	}
}

// start runs the container's process through the shim.
func (c *container) start(spec shimSpec, specDir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	specPath := filepath.Join(specDir, c.spec.Name+".json")
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return err
	}
	if err := resetTerminationLog(c.termLog); err != nil {
		return err
	}
	logf, err := os.OpenFile(c.runLog(c.restartCount), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, ShimCommand, specPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting container %s: %w", c.spec.Name, err)
	}
	c.pid = cmd.Process.Pid
	if err := os.MkdirAll(filepath.Join(specDir, "pids"), 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(specDir, "pids", c.spec.Name), []byte(strconv.Itoa(c.pid)), 0o644)
	}
	c.startedAt = time.Now()
	c.running = true
	c.ready = false
	c.started = false
	c.killReason = ""
	c.waiting = corev1.ContainerStateWaiting{}
	exited := make(chan struct{})
	c.exited = exited
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		c.recordExit(err)
		close(exited)
	}()
	return nil
}

// runLog is the log file of the container's run-th run (0 is the first):
// the run whose restart count is run. A node agent that starts again
// counts from 0 again and appends to the files it finds.
func (c *container) runLog(run int32) string {
	return filepath.Join(c.logDir, strconv.Itoa(int(run))+".log")
}

// recordExit remembers how the process ended, with its termination
// message, and schedules a restart.
func (c *container) recordExit(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, signal := 0, ""
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code, signal = 128+int(ws.Signal()), ws.Signal().String()
		} else {
			code = exitErr.ExitCode()
		}
	} else if err != nil {
		code = 128
	}
	reason := "Completed"
	switch {
	case c.killReason != "":
		reason = c.killReason
	case code != 0:
		reason = "Error"
	}
	msg := ""
	if signal != "" {
		msg = "killed by " + signal
	}
	// A kubelet appends the message to the runtime's, which containerd
	// leaves empty for a process killed by a signal: what users read is
	// the message alone.
	if m := terminationMessage(c.spec.TerminationMessagePolicy, c.termLog, c.runLog(c.restartCount), code); m != "" {
		msg = m
	}
	c.lastExit = &corev1.ContainerStateTerminated{
		ExitCode:    int32(code),
		Reason:      reason,
		Message:     msg,
		StartedAt:   metav1.NewTime(c.startedAt),
		FinishedAt:  metav1.Now(),
		ContainerID: c.containerID(),
	}
	c.running = false
	c.ready = false
	if c.probeCancel != nil {
		c.probeCancel()
		c.probeCancel = nil
	}
	if time.Since(c.startedAt) > backoffReset {
		c.backoff = 0
	}
	switch {
	case c.backoff == 0:
		c.backoff = backoffInitial
	case c.backoff < backoffMax:
		c.backoff = min(2*c.backoff, backoffMax)
	}
	c.nextStart = time.Now().Add(c.backoff)
}

func (c *container) containerID() string {
	return "localcluster://" + strconv.Itoa(c.pid)
}

// signal sends sig to the container's process group.
func (c *container) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return fmt.Errorf("container %s is not running", c.spec.Name)
	}
	return syscall.Kill(-c.pid, sig)
}

// awaitStopped returns once every thread of the container's process group
// is stopped. SIGSTOP is only queued when kill returns: a thread running on
// the other core keeps running until it next enters the kernel, so a pause
// is not a pause until the threads say so.
func (c *container) awaitStopped(ctx context.Context) error {
	c.mu.Lock()
	pgid := c.pid
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		running, err := runningThread(pgid)
		if err != nil {
			return err
		}
		if running == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s was sent SIGSTOP but %s has not stopped", c.spec.Name, running)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// runningThread names a thread of process group pgid that is not stopped
// ("pid 12 thread 14 in state R"), or returns "" when all are.
func runningThread(pgid int) (string, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join("/proc", p.Name(), "task"))
		if err != nil {
			continue // gone meanwhile
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "task", task.Name(), "stat"))
			if err != nil {
				continue
			}
			// The state follows the command name, which is in
			// parentheses and may hold anything.
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(fields) == 0 {
				continue
			}
			switch fields[0] {
			case "T", "t", "Z", "X":
			default:
				return fmt.Sprintf("pid %d thread %s in state %s", pid, task.Name(), fields[0]), nil
			}
		}
	}
	return "", nil
}

// stop ends the process: SIGTERM, then SIGKILL after grace. reason is what
// the container's termination says (Killed by the agent, say).
func (c *container) stop(grace time.Duration, reason string) {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return
	}
	c.killReason = reason
	pid, exited := c.pid, c.exited
	c.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGCONT) // a paused process cannot handle SIGTERM
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
}

// isRunning tells whether the process is alive.
func (c *container) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// shouldStart tells whether the container is due to (re)start under the
// pod's restart policy, and sets the waiting reason while it backs off.
func (c *container) shouldStart(policy corev1.RestartPolicy, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return false
	}
	if c.lastExit != nil {
		succeeded := c.lastExit.ExitCode == 0
		switch {
		case c.isInit && succeeded:
			return false
		case policy == corev1.RestartPolicyNever:
			return false
		case policy == corev1.RestartPolicyOnFailure && succeeded:
			return false
		}
		if now.Before(c.nextStart) {
			c.waiting = corev1.ContainerStateWaiting{
				Reason:  "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container %s", c.backoff, c.spec.Name),
			}
			return false
		}
	}
	return true
}

// markRestart counts a restart of a container that ran before.
func (c *container) markRestart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastExit != nil {
		c.restartCount++
	}
}

// setWaiting records why the container cannot start.
func (c *container) setWaiting(reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting = corev1.ContainerStateWaiting{Reason: reason, Message: message}
}

// succeeded tells whether the container's last process exited 0 and it is
// not running.
func (c *container) succeeded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.running && c.lastExit != nil && c.lastExit.ExitCode == 0
}

// terminal tells whether the container will not run again under policy.
func (c *container) terminal(policy corev1.RestartPolicy) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.lastExit == nil {
		return false
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return true
	case corev1.RestartPolicyOnFailure:
		return c.lastExit.ExitCode == 0
	default:
		return false
	}
}

// status is the container's status as a kubelet reports it.
func (c *container) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := corev1.ContainerStatus{
		Name:         c.spec.Name,
		Image:        c.spec.Image,
		ImageID:      c.imageID,
		RestartCount: c.restartCount,
		Ready:        c.running && c.ready,
		Started:      ptrBool(c.running && c.started),
	}
	if c.lastExit != nil && (c.running || c.waiting.Reason != "") {
		s.LastTerminationState.Terminated = c.lastExit.DeepCopy()
	}
	switch {
	case c.running:
		s.ContainerID = c.containerID()
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
	case c.waiting.Reason != "":
		s.State.Waiting = c.waiting.DeepCopy()
	case c.lastExit != nil:
		s.ContainerID = c.lastExit.ContainerID
		s.State.Terminated = c.lastExit.DeepCopy()
	default:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return s
}

func ptrBool(b bool) *bool { return &b }
