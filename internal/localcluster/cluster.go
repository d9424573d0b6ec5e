package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/etcd-operator/etcd-operator/internal/localcluster/images"
	"github.com/etcd-operator/etcd-operator/internal/localcluster/netsvc"
)

// Cluster is a running local cluster.
type Cluster struct {
	cfg    Config
	cp     *controlPlane
	client kubernetes.Interface
	nodes  []*node
}

// Run starts a local cluster and serves it until ctx ends, then stops
// everything and removes what it created, except the state directory's
// logs. ready is called once the cluster accepts pods.
func Run(ctx context.Context, cfg Config, ready func(*Cluster)) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := takeOver(ctx, cfg); err != nil {
		return err
	}
	defer func() {
		cleanup(context.Background(), cfg.StateDir, cfg.Network)
		_ = os.Remove(cfg.Network.lockFile())
	}()
	// Everything started below stops before the cleanup above.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, dir := range []string{cfg.logDir(), cfg.pidDir(), cfg.podsDir(), cfg.volumesDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cfg.networkFile(), []byte(strconv.Itoa(int(cfg.Network))), 0o644); err != nil {
		return err
	}
	if err := setupHostNetwork(ctx, cfg.Network); err != nil {
		return err
	}

	c := &Cluster{cfg: cfg, cp: &controlPlane{cfg: cfg}}
	defer c.cp.stop()
	client, err := c.cp.start(ctx)
	if err != nil {
		return err
	}
	c.client = client
	// Pods need their namespace's default ServiceAccount, which
	// kube-controller-manager creates.
	err = poll(ctx, 200*time.Millisecond, "the default ServiceAccount", func() error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, storageClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default StorageClass: %w", err)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	services, slices := factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices()
	proxy := netsvc.NewServiceProxy(services.Lister(), slices.Lister(), netsvc.IPAddrManager{Link: cfg.Network.Bridge()})
	trigger := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { proxy.Trigger() },
		UpdateFunc: func(any, any) { proxy.Trigger() },
		DeleteFunc: func(any) { proxy.Trigger() },
	}
	_, _ = services.Informer().AddEventHandler(trigger)
	_, _ = slices.Informer().AddEventHandler(trigger)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go proxy.Run(ctx, 10*time.Second)
	dns := netsvc.NewDNS(ClusterDomain, services.Lister(), slices.Lister())
	dnsErr := make(chan error, 1)
	go func() { dnsErr <- dns.Serve(ctx, cfg.Network.GatewayIP()+":53") }()
	go (&provisioner{cfg: cfg, client: client}).run(ctx)

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	table := images.NewTable(cfg.BinDir)
	for i := 0; i < cfg.Nodes; i++ {
		n := &node{
			name: nodeName(i), index: i, cfg: cfg, client: client, images: table,
			recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "localcluster-agent", Host: nodeName(i)}),
		}
		if err := n.start(ctx); err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}
	defer func() {
		for _, n := range c.nodes {
			n.stop()
		}
	}()

	control, err := c.serveControl(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = control.Close() }()
	if err := os.WriteFile(cfg.readyFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	logger.Info("Local cluster is ready", "kubeconfig", cfg.Kubeconfig(), "nodes", cfg.Nodes)
	if ready != nil {
		ready(c)
	}

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logger.Info("Stopping the local cluster")
			return nil
		case err := <-dnsErr:
			if ctx.Err() == nil {
				return fmt.Errorf("cluster DNS stopped: %w", err)
			}
		case <-tick.C:
			if err := c.cp.check(); err != nil {
				return err
			}
		}
	}
}

// Client is the admin client of the cluster.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// takeOver makes this run the owner of its network's names (the bridge,
// the namespaces), cleaning up after an earlier run on the network that
// did not stop cleanly. It refuses while another local cluster runs on
// the network.
func takeOver(ctx context.Context, cfg Config) error {
	n := cfg.Network
	if data, err := os.ReadFile(n.lockFile()); err == nil {
		fields := strings.Fields(string(data))
		if len(fields) == 2 {
			pid, _ := strconv.Atoi(fields[0])
			if pid > 0 && pid != os.Getpid() && pidAlive(pid) {
				return fmt.Errorf("a local cluster from %s is running on network %d (pid %d); stop it first with `localcluster down --state-dir %s`, or use another --network", fields[1], n, pid, fields[1])
			}
			cleanup(ctx, fields[1], n)
		}
	}
	cleanup(ctx, cfg.StateDir, n)
	if err := os.RemoveAll(cfg.StateDir); err != nil {
		return fmt.Errorf("removing the previous state in %s: %w", cfg.StateDir, err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(n.lockFile(), []byte(fmt.Sprintf("%d %s", os.Getpid(), cfg.StateDir)), 0o644)
}

// cleanup removes what a local cluster with this state directory on
// network n may have left: its processes, mounts, network namespaces and
// links.
func cleanup(ctx context.Context, stateDir string, n Network) {
	killRecorded(filepath.Join(stateDir, "pids"))
	killPods(filepath.Join(stateDir, "pods"))
	unmountUnder(ctx, stateDir)
	cleanupHostNetwork(ctx, n)
	cleanupThrottles()
	_ = os.Remove(filepath.Join(stateDir, "ready"))
	_ = os.Remove(filepath.Join(stateDir, "control.sock"))
}

// killPods kills container processes still running from a state
// directory, found through the pid files their pods keep.
func killPods(dir string) {
	pods, _ := os.ReadDir(dir)
	for _, p := range pods {
		if p.IsDir() {
			killRecorded(filepath.Join(dir, p.Name(), "pids"))
		}
	}
}

// unmountUnder unmounts every mount point below dir, deepest first.
func unmountUnder(ctx context.Context, dir string) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			points = append(points, fields[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = run(ctx, "umount", "-l", points[i])
	}
}

// WaitReady waits until the local cluster in stateDir is ready, or
// exited reports that its process ended.
func WaitReady(ctx context.Context, stateDir string, exited func() bool) error {
	return poll(ctx, 250*time.Millisecond, "the local cluster to be ready", func() error {
		if exited() {
			return errors.New("the local cluster exited")
		}
		_, err := os.Stat(filepath.Join(stateDir, "ready"))
		return err
	})
}
