package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/etcd-operator/etcd-operator/internal/localcluster/podenv"
)

// podWorker runs one pod on a node: it owns the pod's network namespace,
// volumes and containers, and writes the pod's status. It is driven by
// updates of the pod, its probes' verdicts and a steady tick.
type podWorker struct {
	node *node
	dir  string

	mu         sync.Mutex
	pod        *corev1.Pod
	net        podNetwork
	netReady   bool
	volumes    *podVolumes
	inits      []*container
	containers []*container
	volumeErr  string
	lastStatus *corev1.PodStatus
	startTime  metav1.Time

	updates chan *corev1.Pod
	// probed asks for a sync after a probe's verdict changed, so that
	// the status says so at once, as the kubelet's does.
	probed chan struct{}
	done   chan struct{}
}

func newPodWorker(n *node, pod *corev1.Pod, ip string) *podWorker {
	dir := filepath.Join(n.cfg.podsDir(), fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	w := &podWorker{
		node:    n,
		dir:     dir,
		pod:     pod,
		net:     newPodNetwork(n.cfg.Network, string(pod.UID), ip),
		volumes: newPodVolumes(n.client, dir, n.allocatable()),
		updates: make(chan *corev1.Pod, 1),
		probed:  make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	for _, c := range pod.Spec.InitContainers {
		w.inits = append(w.inits, newContainer(c, true, dir))
	}
	for _, c := range pod.Spec.Containers {
		w.containers = append(w.containers, newContainer(c, false, dir))
	}
	return w
}

// update hands the worker the latest version of its pod.
func (w *podWorker) update(pod *corev1.Pod) {
	select {
	case <-w.updates:
	default:
	}
	w.updates <- pod
}

// run syncs the pod until it is gone or ctx ends; on ctx end it stops the
// containers (a node stopping) and keeps the pod's data. The first sync
// is at once, the next on an update, a probe's verdict or the tick.
func (w *podWorker) run(ctx context.Context) {
	defer close(w.done)
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(w.pod), "node", w.node.name)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		finished, err := w.sync(ctx)
		if err != nil {
			logger.V(2).Info("Pod sync failed", "err", err)
		}
		if finished {
			return
		}
		select {
		case <-ctx.Done():
			// A stopped node is off the network: its pods' addresses
			// go with it, so a pod started after it is restarted can
			// never meet a stale namespace holding the same address.
			w.stopContainers(0, "NodeStopped")
			w.net.teardown(context.WithoutCancel(ctx))
			return
		case pod := <-w.updates:
			w.mu.Lock()
			w.pod = pod
			w.mu.Unlock()
		case <-w.probed:
		case <-tick.C:
		}
	}
}

// sync moves the pod one step towards its spec and reports its status. It
// returns true once the pod is deleted and cleaned up.
func (w *podWorker) sync(ctx context.Context) (bool, error) {
	w.mu.Lock()
	pod := w.pod
	w.mu.Unlock()

	if pod.DeletionTimestamp != nil {
		return true, w.terminate(ctx, pod)
	}
	if !w.netReady {
		if err := w.net.setup(ctx); err != nil {
			return false, err
		}
		if err := w.writeNetworkFiles(pod); err != nil {
			return false, err
		}
		w.netReady = true
		w.startTime = metav1.Now()
	}
	if err := w.volumes.sync(ctx, pod); err != nil {
		w.volumeErr = err.Error()
		for _, c := range append(append([]*container(nil), w.inits...), w.containers...) {
			if !c.isRunning() {
				c.setWaiting("ContainerCreating", err.Error())
			}
		}
		return false, w.reportStatus(ctx, pod)
	}
	w.volumeErr = ""

	// The downward API reads addresses from the status, which the agent
	// knows before the API server does.
	pod = pod.DeepCopy()
	pod.Status.PodIP, pod.Status.PodIPs = w.net.ip, []corev1.PodIP{{IP: w.net.ip}}
	pod.Status.HostIP, pod.Status.HostIPs = w.net.host.GatewayIP(), []corev1.HostIP{{IP: w.net.host.GatewayIP()}}
	policy := pod.Spec.RestartPolicy
	if w.runInits(ctx, pod, policy) {
		for _, c := range w.containers {
			if c.shouldStart(policy, time.Now()) {
				w.startContainer(ctx, pod, c)
			}
		}
	}
	return false, w.reportStatus(ctx, pod)
}

// runInits runs init containers one at a time, and tells whether all have
// succeeded.
func (w *podWorker) runInits(ctx context.Context, pod *corev1.Pod, policy corev1.RestartPolicy) bool {
	initPolicy := policy
	if initPolicy == corev1.RestartPolicyAlways {
		initPolicy = corev1.RestartPolicyOnFailure
	}
	for _, c := range w.inits {
		if c.succeeded() {
			continue
		}
		if c.shouldStart(initPolicy, time.Now()) {
			w.startContainer(ctx, pod, c)
		}
		return false
	}
	return true
}

// startContainer builds the container's environment, command line and
// mounts and starts it through the shim; a failure is shown as the
// container's waiting reason.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c *container) {
	img, err := w.node.images.Resolve(c.spec.Image)
	if err != nil {
		reason := "ErrImagePull"
		if c.waiting.Reason == "ErrImagePull" || c.waiting.Reason == "ImagePullBackOff" {
			reason = "ImagePullBackOff"
		}
		c.setWaiting(reason, err.Error())
		return
	}
	env, err := podenv.Env(ctx, pod, &c.spec, w.node.getter(pod.Namespace))
	if err != nil {
		c.setWaiting("CreateContainerConfigError", err.Error())
		return
	}
	envMap := podenv.Map(env)
	command, args := podenv.CommandLine(&c.spec, envMap)
	volumes := mountPaths(&c.spec)
	argv, err := img.Argv(command, args, volumes)
	if err != nil {
		c.setWaiting("RunContainerError", err.Error())
		return
	}
	mounts, err := w.mounts(pod, c)
	if err != nil {
		c.setWaiting("CreateContainerConfigError", err.Error())
		return
	}
	bins := binPaths(w.node.cfg.BinDir)
	spec := shimSpec{
		Netns:    w.net.netnsPath(),
		Rootfs:   filepath.Join(w.dir, "rootfs", c.spec.Name),
		Hostname: podHostname(pod),
		BinDir:   w.node.cfg.BinDir,
		Mounts:   mounts,
		Argv:     bins.argv(argv),
		Env:      mergeEnv(baseEnv(pod, w.net.host, len(img.Binaries) > 0), env),
		WorkDir:  c.spec.WorkingDir,
		// Linked whenever the image has binaries: a container's own PATH
		// may name imageBinDir too.
		ImageBinaries: bins.binaries(img.Binaries),
		ImageFiles:    img.Files,
	}
	c.markRestart()
	if err := c.start(spec, w.dir); err != nil {
		c.setWaiting("RunContainerError", err.Error())
		return
	}
	c.imageID = img.Ref
	w.node.recordEvent(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.spec.Name)
	probeCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.probeCancel = cancel
	pid := c.pid
	c.mu.Unlock()
	target := probeTarget{podIP: w.net.ip, pid: pid, argv: func(cmd []string) ([]string, error) {
		argv, err := img.Argv(cmd, nil, volumes)
		return bins.argv(argv), err
	}}
	go runProbes(probeCtx, &c.spec, target, func(kind probeKind, ok bool, msg string) {
		w.onProbe(pod, c, kind, ok, msg)
	})
}

// onProbe applies a probe verdict: readiness and startup set flags, a
// failed liveness probe restarts the container.
func (w *podWorker) onProbe(pod *corev1.Pod, c *container, kind probeKind, ok bool, msg string) {
	changed := false
	switch kind {
	case readinessProbe:
		c.mu.Lock()
		changed, c.ready = c.ready != ok, ok
		c.mu.Unlock()
	case startupProbe:
		c.mu.Lock()
		changed, c.started = c.started != ok, ok
		c.mu.Unlock()
	case livenessProbe:
		if ok {
			return
		}
		w.node.recordEvent(pod, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: %s", msg)
		w.node.recordEvent(pod, corev1.EventTypeNormal, "Killing", "Container %s failed liveness probe, will be restarted", c.spec.Name)
		go c.stop(gracePeriod(pod, nil), "Error")
	}
	if !ok && kind == readinessProbe {
		w.node.recordEvent(pod, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: %s", msg)
	}
	if changed {
		select {
		case w.probed <- struct{}{}:
		default: // a sync is already asked for
		}
	}
}

// mounts lists the container's volume mounts as host paths, plus the
// pod's /etc/hosts, /etc/resolv.conf and /etc/hostname and the container's
// termination log.
func (w *podWorker) mounts(pod *corev1.Pod, c *container) ([]shimMount, error) {
	mounts := []shimMount{
		{Source: filepath.Join(w.dir, "hosts"), Target: "/etc/hosts", ReadOnly: true},
		{Source: filepath.Join(w.dir, "resolv.conf"), Target: "/etc/resolv.conf", ReadOnly: true},
		{Source: filepath.Join(w.dir, "hostname"), Target: "/etc/hostname", ReadOnly: true},
	}
	for _, m := range c.spec.VolumeMounts {
		src, ok := w.volumes.source(m.Name)
		if !ok {
			return nil, fmt.Errorf("volume mount %q names no volume of the pod", m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		mounts = append(mounts, shimMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	// Last, as a kubelet adds it: the path may lie in a volume.
	mounts = append(mounts, shimMount{Source: c.termLog, Target: terminationMessagePath(&c.spec)})
	return mounts, nil
}

// writeNetworkFiles writes the pod's /etc/hosts, /etc/resolv.conf (the
// cluster DNS on the gateway and the search path of its namespace) and
// /etc/hostname.
func (w *podWorker) writeNetworkFiles(pod *corev1.Pod) error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	host := podHostname(pod)
	fqdn := host
	if pod.Spec.Subdomain != "" {
		fqdn = fmt.Sprintf("%s.%s.%s.svc.%s", host, pod.Spec.Subdomain, pod.Namespace, ClusterDomain)
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s %s\n", w.net.ip, fqdn, host)
	resolv := fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n", pod.Namespace, ClusterDomain, ClusterDomain, ClusterDomain, w.net.host.GatewayIP())
	for name, content := range map[string]string{"hosts": hosts, "resolv.conf": resolv, "hostname": host + "\n"} {
		if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// defaultPath is the PATH of a container whose environment has none, as in
// the images the local cluster plays (Docker's default).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// baseEnv is what every container's environment starts with: a PATH, its
// hostname, and the address of the kubernetes Service of network host,
// which a kubelet always adds and in-cluster clients need. With
// imageBinaries (the image has binaries of its own, linked in imageBinDir)
// the PATH starts with imageBinDir, so the container runs them by name as
// in the real image.
func baseEnv(pod *corev1.Pod, host Network, imageBinaries bool) []string {
	path := defaultPath
	if imageBinaries {
		path = imageBinDir + ":" + path
	}
	return []string{
		"PATH=" + path,
		"HOSTNAME=" + podHostname(pod),
		"HOME=/root",
		"KUBERNETES_SERVICE_HOST=" + host.KubernetesServiceIP(),
		"KUBERNETES_SERVICE_PORT=443",
		"KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://" + host.KubernetesServiceIP() + ":443",
	}
}

// mergeEnv returns base with env on top, as a runtime puts a container's
// environment over its image's: a variable of env replaces base's of the
// same name in place (a container's own PATH wins), the others follow.
// A process given a name twice would read the first in most programs.
func mergeEnv(base, env []string) []string {
	merged := append([]string(nil), base...)
	index := make(map[string]int, len(merged))
	for i, kv := range merged {
		name, _, _ := strings.Cut(kv, "=")
		index[name] = i
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			merged[i] = kv
			continue
		}
		index[name] = len(merged)
		merged = append(merged, kv)
	}
	return merged
}

// mountPaths returns where the container's volumes are mounted in it.
func mountPaths(c *corev1.Container) []string {
	paths := make([]string, 0, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	return paths
}

// podHostname is the pod's hostname: spec.hostname, or its name.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	name := pod.Name
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimSuffix(name, ".")
}

// terminate stops the containers within the grace period, releases the
// pod's network and volumes, and removes the pod from the API server.
func (w *podWorker) terminate(ctx context.Context, pod *corev1.Pod) error {
	w.stopContainers(gracePeriod(pod, pod.DeletionGracePeriodSeconds), "Completed")
	w.cleanup(ctx)
	zero := int64(0)
	err := w.node.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// stopContainers stops every running container, in parallel.
func (w *podWorker) stopContainers(grace time.Duration, reason string) {
	var wg sync.WaitGroup
	for _, c := range append(append([]*container(nil), w.inits...), w.containers...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(grace, reason)
		}()
	}
	wg.Wait()
}

// cleanup releases the pod's network namespace, address and volumes.
func (w *podWorker) cleanup(ctx context.Context) {
	w.net.teardown(ctx)
	w.volumes.cleanup(ctx)
	_ = os.RemoveAll(w.dir)
	w.node.releaseIP(w.net.ip)
}

// gracePeriod is the pod's termination grace period, or override.
func gracePeriod(pod *corev1.Pod, override *int64) time.Duration {
	s := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		s = *pod.Spec.TerminationGracePeriodSeconds
	}
	if override != nil {
		s = *override
	}
	return time.Duration(s) * time.Second
}

// reportStatus writes the pod's status when it changed.
func (w *podWorker) reportStatus(ctx context.Context, pod *corev1.Pod) error {
	status := w.status(pod)
	if w.lastStatus != nil && apiequality.Semantic.DeepEqual(*w.lastStatus, status) {
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = status
	_, err := w.node.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		latest, getErr := w.node.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		latest.Status = status
		_, err = w.node.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, latest, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	w.lastStatus = &status
	return nil
}

// status computes the pod's status from its containers, as a kubelet does.
func (w *podWorker) status(pod *corev1.Pod) corev1.PodStatus {
	initStatuses := make([]corev1.ContainerStatus, 0, len(w.inits))
	for _, c := range w.inits {
		initStatuses = append(initStatuses, c.status())
	}
	statuses := make([]corev1.ContainerStatus, 0, len(w.containers))
	for _, c := range w.containers {
		statuses = append(statuses, c.status())
	}
	policy := pod.Spec.RestartPolicy
	initialized := true
	for _, c := range w.inits {
		initialized = initialized && c.succeeded()
	}
	allReady, anyRunning, allTerminal, anyFailed := true, false, true, false
	for i, c := range w.containers {
		allReady = allReady && statuses[i].Ready
		anyRunning = anyRunning || c.isRunning()
		allTerminal = allTerminal && c.terminal(policy)
		if s := statuses[i].State.Terminated; s != nil && s.ExitCode != 0 {
			anyFailed = true
		}
	}
	for _, c := range w.inits {
		if policy == corev1.RestartPolicyNever && c.terminal(policy) && !c.succeeded() {
			allTerminal, anyFailed = true, true
		}
	}
	phase := corev1.PodPending
	switch {
	case allTerminal && anyFailed:
		phase = corev1.PodFailed
	case allTerminal:
		phase = corev1.PodSucceeded
	case initialized && (anyRunning || w.everStarted()):
		phase = corev1.PodRunning
	}
	gatesTrue := true
	for _, g := range pod.Spec.ReadinessGates {
		gatesTrue = gatesTrue && conditionTrue(pod.Status.Conditions, g.ConditionType)
	}
	ready := allReady && initialized && phase == corev1.PodRunning
	conds := []corev1.PodCondition{
		condition(pod, corev1.PodReadyToStartContainers, w.netReady, ""),
		condition(pod, corev1.PodInitialized, initialized, "ContainersNotInitialized"),
		condition(pod, corev1.ContainersReady, ready, "ContainersNotReady"),
		condition(pod, corev1.PodReady, ready && gatesTrue, "ContainersNotReady"),
	}
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		default:
			conds = append(conds, c) // PodScheduled, readiness gates, disruption targets
		}
	}
	status := corev1.PodStatus{
		Phase:                 phase,
		Conditions:            conds,
		HostIP:                w.net.host.GatewayIP(),
		HostIPs:               []corev1.HostIP{{IP: w.net.host.GatewayIP()}},
		StartTime:             &w.startTime,
		InitContainerStatuses: initStatuses,
		ContainerStatuses:     statuses,
		QOSClass:              pod.Status.QOSClass,
	}
	if w.netReady {
		status.PodIP = w.net.ip
		status.PodIPs = []corev1.PodIP{{IP: w.net.ip}}
	}
	if w.volumeErr != "" {
		status.Message = w.volumeErr
	}
	return status
}

func (w *podWorker) everStarted() bool {
	for _, c := range w.containers {
		c.mu.Lock()
		started := c.running || c.lastExit != nil
		c.mu.Unlock()
		if started {
			return true
		}
	}
	return false
}

// condition builds a pod condition, keeping the transition time of the
// pod's current one when the status did not change.
func condition(pod *corev1.Pod, t corev1.PodConditionType, ok bool, falseReason string) corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: falseReason}
	if ok {
		c.Status, c.Reason = corev1.ConditionTrue, ""
	}
	c.LastTransitionTime = metav1.Now()
	for _, old := range pod.Status.Conditions {
		if old.Type == t && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// findContainer returns the pod's container (or init container) by name.
func (w *podWorker) findContainer(name string) (*container, error) {
	for _, c := range append(append([]*container(nil), w.inits...), w.containers...) {
		if c.spec.Name == name || name == "" {
			return c, nil
		}
	}
	return nil, fmt.Errorf("pod %s has no container %q", w.pod.Name, name)
}
