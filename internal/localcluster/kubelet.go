package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// KubeletPortBase is the port of the first node's kubelet API on the GatewayIP;
// node i serves it on KubeletPortBase+i, as its Node's daemon endpoint says.
const KubeletPortBase = 10250

// kubeletClientCN is the name kube-apiserver presents to the node agents
// (its --kubelet-client-certificate); the agents serve no one else.
const kubeletClientCN = "kube-apiserver-kubelet-client"

// Timeouts of the streaming sessions, a kubelet's defaults.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
	logFollowPoll         = 100 * time.Millisecond
)

// kubeletPort is the port of the node's kubelet API.
func (n *node) kubeletPort() int { return KubeletPortBase + n.index }

// serveKubeletAPI serves the part of a kubelet's API that kube-apiserver
// proxies for users: container logs (kubectl logs), exec (kubectl exec)
// and port forwarding (kubectl port-forward), until ctx ends. Only
// kube-apiserver's client certificate is accepted, from a CA that signs
// nothing else. Closing the server
// returned stops it.
func (n *node) serveKubeletAPI(ctx context.Context) (*http.Server, error) {
	p := n.cfg.pki()
	cert, err := tls.LoadX509KeyPair(p.path("kubelet.crt"), p.path("kubelet.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the kubelet serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(p.path("kubelet-client-ca.crt"))
	if err != nil {
		return nil, err
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(caPEM)
	ln, err := net.Listen("tcp", net.JoinHostPort(n.cfg.Network.GatewayIP(), strconv.Itoa(n.kubeletPort())))
	if err != nil {
		return nil, fmt.Errorf("node %s: serving the kubelet API: %w", n.name, err)
	}
	srv := &http.Server{
		Handler: n.kubeletHandler(),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCAs,
			MinVersion:   tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != kubeletClientCN {
					return errors.New("only kube-apiserver may call the node agent")
				}
				return nil
			},
		},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Kubelet API stopped", "node", n.name)
		}
	}()
	return srv, nil
}

// kubeletHandler routes the kubelet API paths kube-apiserver uses.
func (n *node) kubeletHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", n.serveLogs)
	for _, path := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc(path, n.serveExec)
	}
	for _, path := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.HandleFunc(path, n.servePortForward)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("the local cluster's node agent serves containerLogs, exec and portForward, not %s", r.URL.Path), http.StatusNotFound)
	})
	return mux
}

// podContainer finds a running pod's container for a request, or writes
// the error a kubelet would.
func (n *node) podContainer(w http.ResponseWriter, r *http.Request) (*podWorker, *container, bool) {
	worker := n.worker(r.PathValue("ns"), r.PathValue("pod"))
	if worker == nil || (r.PathValue("uid") != "" && string(worker.pod.UID) != r.PathValue("uid")) {
		http.Error(w, fmt.Sprintf("pod %s/%s does not run on node %s", r.PathValue("ns"), r.PathValue("pod"), n.name), http.StatusNotFound)
		return nil, nil, false
	}
	c, err := worker.findContainer(r.PathValue("container"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return nil, nil, false
	}
	return worker, c, true
}

// logRequest is what a containerLogs request asks for.
type logRequest struct {
	follow, previous bool
	tailLines        int64 // -1: all
	limitBytes       int64 // 0: no limit
}

// parseLogRequest reads a containerLogs query. The local cluster keeps a
// container's output as written, without a time per line, so it refuses
// what needs one.
func parseLogRequest(q map[string][]string) (logRequest, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	req := logRequest{follow: get("follow") == "true", previous: get("previous") == "true", tailLines: -1}
	for _, k := range []string{"timestamps", "sinceSeconds", "sinceTime"} {
		if v := get(k); v != "" && v != "false" {
			return logRequest{}, fmt.Errorf("the local cluster keeps container output without a time per line, so it cannot serve %s: leave out --timestamps, --since and --since-time", k)
		}
	}
	for k, dst := range map[string]*int64{"tailLines": &req.tailLines, "limitBytes": &req.limitBytes} {
		if v := get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return logRequest{}, fmt.Errorf("%s must be a number of 0 or more, not %q", k, v)
			}
			*dst = n
		}
	}
	return req, nil
}

// lastLines is the end of data holding its last n lines (n < 0: all).
func lastLines(data []byte, n int64) []byte {
	switch {
	case n < 0:
		return data
	case n == 0:
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			if n--; n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}

// serveLogs writes a container's output: the current run's, or with
// previous=true the run before; follow=true keeps writing what the
// current run writes until it ends or the client goes.
func (n *node) serveLogs(w http.ResponseWriter, r *http.Request) {
	_, c, ok := n.podContainer(w, r)
	if !ok {
		return
	}
	req, err := parseLogRequest(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	run, running, exited := c.restartCount, c.running, c.exited
	everRan := c.exited != nil
	c.mu.Unlock()
	if req.previous {
		// While the container waits to start again, its latest run is the
		// current one, as for a kubelet.
		if run == 0 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", c.spec.Name, r.PathValue("pod")), http.StatusBadRequest)
			return
		}
		run, running = run-1, false
	}
	if !everRan {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", c.spec.Name, r.PathValue("pod")), http.StatusBadRequest)
		return
	}
	f, err := os.Open(c.runLog(run))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := &limitedWriter{w: w, limit: req.limitBytes}
	w.Header().Set("Content-Type", "text/plain")
	if _, err := out.Write(lastLines(data, req.tailLines)); err != nil || !req.follow || !running {
		return
	}
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32*1024)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-exited:
			// Write what the run wrote last, then end.
			_, _ = io.CopyBuffer(out, f, buf)
			return
		case <-time.After(logFollowPoll):
		}
		if _, err := io.CopyBuffer(out, f, buf); err != nil {
			return
		}
	}
}

// limitedWriter writes up to limit bytes (0: no limit), then fails.
type limitedWriter struct {
	w              io.Writer
	limit, written int64
}

var errLimitReached = errors.New("limitBytes reached")

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.limit == 0 {
		return l.w.Write(p)
	}
	room := l.limit - l.written
	if room <= 0 {
		return 0, errLimitReached
	}
	var err error
	if int64(len(p)) > room {
		p, err = p[:room], errLimitReached
	}
	n, werr := l.w.Write(p)
	l.written += int64(n)
	if werr != nil {
		return n, werr
	}
	return n, err
}

// serveExec runs a command in a running container, with kubectl exec's
// streams (SPDY, as kube-apiserver speaks to a kubelet).
func (n *node) serveExec(w http.ResponseWriter, r *http.Request) {
	worker, c, ok := n.podContainer(w, r)
	if !ok {
		return
	}
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	exec := containerExecutor{node: n, worker: worker, container: c}
	remotecommand.ServeExec(w, r, exec, worker.pod.Name, string(worker.pod.UID), c.spec.Name, cmd, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// containerExecutor runs commands in one container: in its namespaces,
// root and working directory (nsenter, as exec probes do), with its
// environment and the image's commands.
type containerExecutor struct {
	node      *node
	worker    *podWorker
	container *container
}

func (e containerExecutor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command to run")
	}
	e.container.mu.Lock()
	pid, running := e.container.pid, e.container.running
	e.container.mu.Unlock()
	if !running {
		return fmt.Errorf("container %s is not running", e.container.spec.Name)
	}
	img, err := e.node.images.Resolve(e.container.spec.Image)
	if err != nil {
		return err
	}
	argv, err := img.Argv(cmd, nil, mountPaths(&e.container.spec))
	if err != nil {
		return err
	}
	argv = binPaths(e.node.cfg.BinDir).argv(argv)
	env, err := processEnv(pid)
	if err != nil {
		return fmt.Errorf("reading the container's environment: %w", err)
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--net", "--mount", "--uts", "--root", "--wd", "--"}, argv...)
	proc := exec.CommandContext(ctx, "nsenter", args...)
	proc.Env = env
	if tty {
		err = runWithTTY(proc, in, out, resize)
	} else {
		err = runWithPipes(proc, in, out, errOut)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return utilexec.CodeExitError{Err: err, Code: exitErr.ExitCode()}
	}
	return err
}

// runWithPipes runs proc with the exec streams as its standard files.
// Its stdin is copied by a goroutine of its own, not waited for: the
// client's stdin may stay open after the command ended (the copy then
// ends with the session's stream).
func runWithPipes(proc *exec.Cmd, in io.Reader, out, errOut io.WriteCloser) error {
	if out != nil {
		proc.Stdout = out
	}
	if errOut != nil {
		proc.Stderr = errOut
	}
	var stdin io.WriteCloser
	if in != nil {
		var err error
		if stdin, err = proc.StdinPipe(); err != nil {
			return err
		}
	}
	if err := proc.Start(); err != nil {
		return err
	}
	if in != nil {
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	return proc.Wait()
}

// runWithTTY runs proc on a new terminal that in feeds and out reads,
// sized as the client's terminal is. The client sends its size right
// after the streams open: the process starts once it is here (or after a
// second without it), so that its first look at the terminal sees it.
func runWithTTY(proc *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	var size *pty.Winsize
	select {
	case s, ok := <-resize:
		if ok {
			size = &pty.Winsize{Rows: s.Height, Cols: s.Width}
		}
	case <-time.After(time.Second):
	}
	term, err := pty.StartWithSize(proc, size) // a new session whose terminal it is
	if err != nil {
		return err
	}
	defer func() { _ = term.Close() }()
	go func() {
		for size := range resize {
			_ = pty.Setsize(term, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(term, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if out != nil {
			// Reading a terminal whose process is gone ends with EIO.
			_, _ = io.Copy(out, term)
		}
	}()
	err = proc.Wait()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return err
}

// processEnv is the environment a process started with.
func processEnv(pid int) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil, err
	}
	var env []string
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	return env, nil
}

// servePortForward forwards streams to ports of a pod, dialled from inside
// its network namespace (localhost is the pod's own, as on a kubelet).
func (n *node) servePortForward(w http.ResponseWriter, r *http.Request) {
	worker := n.worker(r.PathValue("ns"), r.PathValue("pod"))
	if worker == nil || (r.PathValue("uid") != "" && string(worker.pod.UID) != r.PathValue("uid")) {
		http.Error(w, fmt.Sprintf("pod %s/%s does not run on node %s", r.PathValue("ns"), r.PathValue("pod"), n.name), http.StatusNotFound)
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, podForwarder{worker: worker}, worker.pod.Name, string(worker.pod.UID), opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// podForwarder copies streams to and from one pod's ports.
type podForwarder struct{ worker *podWorker }

func (f podForwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	conn, err := dialInNetns(ctx, f.worker.net.netnsPath(), net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("pod %s: port %d: %w", f.worker.pod.Name, port, err)
	}
	defer func() { _ = conn.Close() }()
	// The client's end of input is passed on as the pod's; the stream
	// lasts until the pod's side is done.
	go func() { _, _ = io.Copy(conn, stream); _ = conn.(*net.TCPConn).CloseWrite() }()
	answered := make(chan struct{})
	go func() { _, _ = io.Copy(stream, conn); close(answered) }()
	select {
	case <-answered:
	case <-ctx.Done():
	}
	return nil
}

// dialInNetns opens a TCP connection from the network namespace at path:
// the socket is made on a thread that entered it, and belongs to it from
// then on.
func dialInNetns(ctx context.Context, path, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: if it cannot go back to the
		// host's namespace, it ends with this goroutine.
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = host.Close() }()
		target, err := os.Open(path)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("entering the pod's network namespace: %w", err)}
			return
		}
		conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
		if unix.Setns(int(host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// ContainerLogFiles lists a container's log files in the pod directory
// podDir, first run first.
func ContainerLogFiles(podDir, container string) []string {
	matches, _ := filepath.Glob(filepath.Join(podDir, "logs", container, "*.log"))
	run := func(path string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".log"))
		return n
	}
	slices.SortFunc(matches, func(a, b string) int { return run(a) - run(b) })
	return matches
}
