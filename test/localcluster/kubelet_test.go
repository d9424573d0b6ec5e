package localcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl runs the cluster's kubectl as a user would and returns its
// output (stdout and stderr) and its error.
func kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.Bin("kubectl-v1.37.2"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// restartingPod fails its first run (it prints "run 1") and then ticks
// ("run 2", "tick 1", "tick 2"...), its run count kept in an emptyDir.
func restartingPod() *corev1.Pod {
	pod := busybox("talker", `n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo "run $n"
[ $n -ge 2 ] || exit 3
i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done`)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return pod
}

var tickRE = regexp.MustCompile(`tick (\d+)`)

// lastTick is the highest tick in out, or 0.
func lastTick(out string) int {
	last := 0
	for _, m := range tickRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		last = max(last, n)
	}
	return last
}

// TestKubectlLogs: the node agents serve `kubectl logs` through the API
// server, with --previous, --tail, --limit-bytes and -f.
func TestKubectlLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	createPod(ctx, t, ns, restartingPod(), false)
	eventually(t, time.Minute, "talker to run a second time", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "talker", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := p.Status.ContainerStatuses; len(s) == 0 || s[0].RestartCount != 1 || s[0].State.Running == nil {
			return fmt.Errorf("containers: %s", describeContainers(p))
		}
		return nil
	})

	eventually(t, 30*time.Second, "the second run to tick", func() error {
		out, err := kubectl(ctx, nil, "logs", "-n", ns, "talker")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if !strings.HasPrefix(out, "run 2\n") || lastTick(out) == 0 {
			return fmt.Errorf("kubectl logs printed %q, want the second run's lines", out)
		}
		return nil
	})
	if out, err := kubectl(ctx, nil, "logs", "-n", ns, "talker", "--previous"); err != nil || out != "run 1\n" {
		t.Errorf("kubectl logs --previous: %v, %q; want the first run's one line", err, out)
	}
	if out, err := kubectl(ctx, nil, "logs", "-n", ns, "talker", "--tail=1"); err != nil || !tickRE.MatchString(out) || strings.Count(out, "\n") != 1 {
		t.Errorf("kubectl logs --tail=1: %v, %q; want one tick line", err, out)
	}
	if out, err := kubectl(ctx, nil, "logs", "-n", ns, "talker", "--limit-bytes=4"); err != nil || out != "run " {
		t.Errorf("kubectl logs --limit-bytes=4: %v, %q; want %q", err, out, "run ")
	}
	out, err := kubectl(ctx, nil, "logs", "-n", ns, "talker", "--timestamps")
	if err == nil || !strings.Contains(out, "without a time per line") {
		t.Errorf("kubectl logs --timestamps: %v, %q; want an error saying the local cluster keeps no times", err, out)
	}
	out, err = kubectl(ctx, nil, "logs", "-n", ns, "nobody")
	if err == nil || !strings.Contains(out, `pods "nobody" not found`) {
		t.Errorf("kubectl logs of a pod that does not exist: %v, %q", err, out)
	}

	// -f goes on printing what the container writes.
	now, err := kubectl(ctx, nil, "logs", "-n", ns, "talker")
	if err != nil {
		t.Fatal(err, now)
	}
	followCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	follow := exec.CommandContext(followCtx, env.Bin("kubectl-v1.37.2"), "logs", "-f", "-n", ns, "talker")
	follow.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	want, seen := lastTick(now)+5, 0
	for lines := bufio.NewScanner(stdout); lines.Scan() && seen < want; {
		seen = max(seen, lastTick(lines.Text()))
	}
	cancel()
	_ = follow.Wait()
	if seen < want {
		t.Errorf("kubectl logs -f stopped at tick %d; the log had tick %d when it started, want tick %d", seen, lastTick(now), want)
	}
}

// TestKubectlExec: `kubectl exec` runs commands in a container, with its
// files, environment and image's commands, stdin, exit codes and a TTY.
func TestKubectlExec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	shell := busybox("shell", "echo inside > /data/mark; sleep 3600")
	shell.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello from the pod"}}
	shell.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	shell.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	createPod(ctx, t, ns, shell, false)
	createPod(ctx, t, ns, etcdPod("db"), true)

	eventually(t, 30*time.Second, "the container's files and environment through exec", func() error {
		out, err := kubectl(ctx, nil, "exec", "-n", ns, "shell", "--", "sh", "-c", `cat /data/mark; echo "$GREETING"; hostname`)
		if err != nil {
			return fmt.Errorf("%w: %q", err, out)
		}
		if out != "inside\nhello from the pod\nshell\n" {
			return fmt.Errorf("printed %q", out)
		}
		return nil
	})
	out, err := kubectl(ctx, strings.NewReader("from stdin\n"), "exec", "-i", "-n", ns, "shell", "--", "cat")
	if err != nil || out != "from stdin\n" {
		t.Errorf("kubectl exec -i cat: %v, %q", err, out)
	}
	// The command ends while the client's stdin stays open: exec ends too.
	// (A pipe of the OS: kubectl reads it itself, no copy waits on it.)
	open, keepOpen, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keepOpen.Close(); _ = open.Close() }()
	quick, cancel := context.WithTimeout(ctx, 30*time.Second)
	out, err = kubectl(quick, open, "exec", "-i", "-n", ns, "shell", "--", "echo", "done")
	cancel()
	if err != nil || out != "done\n" {
		t.Errorf("kubectl exec -i of a command that does not read its stdin: %v, %q", err, out)
	}
	out, err = kubectl(ctx, nil, "exec", "-n", ns, "shell", "--", "sh", "-c", "exit 7")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
		t.Errorf("kubectl exec of a command exiting 7: %v, %q; want kubectl to exit 7", err, out)
	}
	// The etcd image's etcdctl talks to the member in its own pod.
	out, err = kubectl(ctx, nil, "exec", "-n", ns, "db", "--", "etcdctl", "--endpoints=http://127.0.0.1:2379", "put", "k", "v")
	if err != nil || out != "OK\n" {
		t.Errorf("kubectl exec db -- etcdctl put: %v, %q", err, out)
	}

	// A terminal: kubectl itself runs on one (as in a user's shell), the
	// command gets one of its own, of the client's size.
	ttyCtx, cancelTTY := context.WithTimeout(ctx, time.Minute)
	defer cancelTTY()
	cmd := exec.CommandContext(ttyCtx, env.Bin("kubectl-v1.37.2"), "exec", "-it", "-n", ns, "shell", "--", "sh", "-c", "tty; stty size")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 111})
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	_, _ = io.Copy(&screen, term) // ends with EIO once kubectl is gone
	_ = term.Close()
	if err := cmd.Wait(); err != nil || !strings.Contains(screen.String(), "/dev/pts/") || !strings.Contains(screen.String(), "33 111") {
		t.Errorf("kubectl exec -it: %v; want a terminal of 33 rows and 111 columns, the screen showed %q", err, screen.String())
	}
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 2379`)

// TestKubectlPortForward: `kubectl port-forward` reaches a port the pod
// serves on its own localhost only, through the API server.
func TestKubectlPortForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	db := etcdPod("db")
	db.Spec.Containers[0].Command = []string{"etcd", "--data-dir=/var/lib/etcd", "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379"}
	db.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"etcdctl", "endpoint", "health"}}},
		PeriodSeconds: 1,
	}
	createPod(ctx, t, ns, db, true)

	fwdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fwd := exec.CommandContext(fwdCtx, env.Bin("kubectl-v1.37.2"), "port-forward", "-n", ns, "pod/db", ":2379")
	fwd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	stdout, err := fwd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	fwd.Stderr = &stderr
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = fwd.Wait() }()
	lines := bufio.NewScanner(stdout)
	port := ""
	for port == "" && lines.Scan() {
		if m := forwardingRE.FindStringSubmatch(lines.Text()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatalf("kubectl port-forward printed no local port; stderr: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	// Each connection is a stream of its own; the last one ends its
	// request before the answer comes (a half-close), which must still
	// bring the answer back.
	noReuse := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := noReuse.Get("http://127.0.0.1:" + port + "/version")
		if err != nil {
			t.Fatalf("request %d through the port-forward: %v (stderr: %s)", i, err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !strings.Contains(string(body), `"etcdserver":"3.6.16"`) {
			t.Errorf("request %d through the port-forward: %s %q, want etcd's version", i, resp.Status, body)
		}
	}
	conn, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "GET /version HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	answer, err := io.ReadAll(conn)
	if !strings.Contains(string(answer), `"etcdserver":"3.6.16"`) {
		t.Errorf("a half-closed request through the port-forward: %v, %q; want etcd's version", err, answer)
	}
}
