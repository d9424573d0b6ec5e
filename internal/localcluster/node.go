package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/etcd-operator/etcd-operator/internal/localcluster/images"
)

// node is one Node of the local cluster, served by an agent that plays
// kubelet and container runtime for the pods bound to it.
type node struct {
	name     string
	index    int
	cfg      Config
	client   kubernetes.Interface
	images   *images.Table
	recorder record.EventRecorder

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	usedIPs map[string]bool
	cancel  context.CancelFunc // stops the agent; nil while stopped
	stopped chan struct{}
}

// allocatable is what the node offers pods.
func (n *node) allocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("50Gi"),
	}
}

// start registers the Node and runs the agent until stop.
func (n *node) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return fmt.Errorf("node %s is already running", n.name)
	}
	if n.workers == nil {
		n.workers, n.usedIPs = map[types.UID]*podWorker{}, map[string]bool{}
	}
	if err := n.register(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	kubeletAPI, err := n.serveKubeletAPI(ctx)
	if err != nil {
		cancel()
		return err
	}
	n.cancel = cancel
	n.stopped = make(chan struct{})
	go n.run(ctx, n.stopped, kubeletAPI)
	return nil
}

// stop stops the agent: every container dies at once, as on a power cut,
// and the Node stops renewing its lease, so it turns NotReady. Pod data
// stays, as it does on a disk.
func (n *node) stop() {
	n.mu.Lock()
	cancel, stopped := n.cancel, n.stopped
	n.cancel = nil
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-stopped
}

func (n *node) run(ctx context.Context, stopped chan struct{}, kubeletAPI *http.Server) {
	defer close(stopped)
	defer func() { _ = kubeletAPI.Close() }()
	logger := klog.FromContext(ctx).WithValues("node", n.name)
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.name).String()
	}))
	podInformer := factory.Core().V1().Pods().Informer()
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj) },
		DeleteFunc: func(obj any) { n.podDeleted(obj) },
	})
	factory.Start(ctx.Done())
	go n.heartbeat(ctx, logger)
	<-ctx.Done()
	factory.Shutdown()
	n.mu.Lock()
	workers := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		workers = append(workers, w)
	}
	n.workers = map[types.UID]*podWorker{}
	n.mu.Unlock()
	for _, w := range workers {
		<-w.done
	}
	n.mu.Lock()
	n.usedIPs = map[string]bool{}
	n.mu.Unlock()
}

// podChanged starts a worker for a new pod or hands the update to its
// worker.
func (n *node) podChanged(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		if pod.DeletionTimestamp != nil {
			go n.forceDelete(ctx, pod)
		}
		return
	}
	ip, err := n.allocateIP()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot run pod", "pod", klog.KObj(pod))
		return
	}
	w := newPodWorker(n, pod, ip)
	n.workers[pod.UID] = w
	go func() {
		w.run(ctx)
		n.mu.Lock()
		if n.workers[pod.UID] == w {
			delete(n.workers, pod.UID)
		}
		n.mu.Unlock()
	}()
}

// podDeleted makes sure a pod deleted without grace stops running.
func (n *node) podDeleted(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			pod, ok = tomb.Obj.(*corev1.Pod)
		}
		if !ok {
			return
		}
	}
	n.mu.Lock()
	w, found := n.workers[pod.UID]
	n.mu.Unlock()
	if !found {
		return
	}
	gone := pod.DeepCopy()
	if gone.DeletionTimestamp == nil {
		gone.DeletionTimestamp = ptr.To(metav1.Now())
	}
	gone.DeletionGracePeriodSeconds = ptr.To[int64](0)
	w.update(gone)
}

// forceDelete removes a finished pod that is being deleted: it has nothing
// left to stop.
func (n *node) forceDelete(ctx context.Context, pod *corev1.Pod) {
	_ = n.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
}

// worker finds the worker of a running pod.
func (n *node) worker(namespace, name string) *podWorker {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		if w.pod.Namespace == namespace && w.pod.Name == name {
			return w
		}
	}
	return nil
}

func (n *node) allocateIP() (string, error) {
	cidr := n.cfg.Network.nodePodCIDR(n.index)
	base := cidr.IP.To4()
	for i := 2; i < 255; i++ {
		ip := net.IPv4(base[0], base[1], base[2], byte(i)).String()
		if !n.usedIPs[ip] {
			n.usedIPs[ip] = true
			return ip, nil
		}
	}
	return "", fmt.Errorf("node %s has no free pod address in %s", n.name, cidr)
}

func (n *node) releaseIP(ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.usedIPs, ip)
}

// register creates or refreshes the Node object.
func (n *node) register(ctx context.Context) error {
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			corev1.LabelHostname:   n.name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
		}},
		Spec: corev1.NodeSpec{PodCIDR: n.cfg.Network.nodePodCIDR(n.index).String(), PodCIDRs: []string{n.cfg.Network.nodePodCIDR(n.index).String()}},
	}
	node, err := n.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", n.name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := n.updateNodeStatus(ctx, node); !apierrors.IsConflict(err) {
			return err
		}
		latest, getErr := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		node = latest
		return n.updateNodeStatus(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("reporting the status of node %s: %w", n.name, err)
	}
	return nil
}

func (n *node) updateNodeStatus(ctx context.Context, node *corev1.Node) error {
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "local cluster node agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready.LastTransitionTime = c.LastTransitionTime
		}
	}
	conds := []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		conds = append(conds, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHas" + "No" + string(t), LastHeartbeatTime: now, LastTransitionTime: now})
	}
	node.Status = corev1.NodeStatus{
		Capacity:        n.allocatable(),
		Allocatable:     n.allocatable(),
		Conditions:      conds,
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.cfg.Network.GatewayIP()}, {Type: corev1.NodeHostName, Address: n.name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.kubeletPort())}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          n.cfg.KubernetesVersion,
			ContainerRuntimeVersion: "localcluster://" + n.cfg.KubernetesVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
	_, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the node's Lease every 10 s and its status every 30 s.
func (n *node) heartbeat(ctx context.Context, logger klog.Logger) {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lastStatus := time.Time{}
	for {
		now := metav1.NowMicro()
		lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: corev1.NamespaceNodeLease},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &n.name, LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.RenewTime = &now
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			logger.V(2).Info("Renewing the node lease failed", "err", err)
		}
		if time.Since(lastStatus) > 30*time.Second {
			if node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
				if err := n.updateNodeStatus(ctx, node); err == nil {
					lastStatus = time.Now()
				}
			}
		}
		if !sleepCtx(ctx, 10*time.Second) {
			return
		}
	}
}

// recordEvent records an event about a pod, as a kubelet would.
func (n *node) recordEvent(pod *corev1.Pod, eventType, reason, format string, args ...any) {
	if n.recorder != nil {
		n.recorder.Eventf(pod, eventType, reason, format, args...)
	}
}

// getter reads Secrets and ConfigMaps of a namespace for environments.
func (n *node) getter(namespace string) apiGetter {
	return apiGetter{client: n.client, namespace: namespace, allocatable: n.allocatable()}
}

type apiGetter struct {
	client      kubernetes.Interface
	namespace   string
	allocatable corev1.ResourceList
}

func (g apiGetter) NodeAllocatable(context.Context) (corev1.ResourceList, error) {
	return g.allocatable, nil
}

func (g apiGetter) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	return g.client.CoreV1().Secrets(g.namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g apiGetter) ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	return g.client.CoreV1().ConfigMaps(g.namespace).Get(ctx, name, metav1.GetOptions{})
}
