package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ports of the control plane on the host's loopback.
const (
	etcdClientPort = 23790
	etcdPeerPort   = 23800
	kcmPort        = 10257
	schedulerPort  = 10259
)

// controlPlane is the control plane's processes.
type controlPlane struct {
	cfg       Config
	processes []*process
}

// start writes the key material and kubeconfig and starts etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, each waited
// for before the next.
// A kubelet's default client budget (KubeletConfiguration's kubeAPIQPS
// and kubeAPIBurst).
const (
	kubeletAPIQPS   = 50
	kubeletAPIBurst = 100
)

func (cp *controlPlane) start(ctx context.Context) (*kubernetes.Clientset, error) {
	cfg := cp.cfg
	p := cfg.pki()
	if err := p.generate([]net.IP{net.ParseIP(cfg.Network.GatewayIP()), net.ParseIP(cfg.Network.KubernetesServiceIP())}, ClusterDomain); err != nil {
		return nil, fmt.Errorf("generating certificates: %w", err)
	}
	if err := writeKubeconfig(cfg.Kubeconfig(), cfg.Network, p); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(cfg.Network.localPort(etcdClientPort))
	peerURL := "http://127.0.0.1:" + strconv.Itoa(cfg.Network.localPort(etcdPeerPort))
	etcd := cp.add("etcd", cfg.bin("etcd-"+cfg.EtcdVersion),
		"--name=controlplane",
		"--data-dir="+filepath.Join(cfg.StateDir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=controlplane="+peerURL,
		"--unsafe-no-fsync",
	)
	if err := etcd.start(); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health"); err != nil {
		return nil, err
	}

	apiserver := cp.add("kube-apiserver", cfg.kubeBin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+cfg.Network.GatewayIP(),
		"--advertise-address="+cfg.Network.GatewayIP(),
		"--secure-port="+strconv.Itoa(APIServerPort),
		"--tls-cert-file="+p.path("apiserver.crt"),
		"--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--service-cluster-ip-range="+cfg.Network.ServiceNetwork(),
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDomain,
		"--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+p.path("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	)
	if err := apiserver.start(); err != nil {
		return nil, err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig())
	if err != nil {
		return nil, err
	}
	// One client serves every node agent, the provisioner and the event
	// recorder. client-go's default limit (5 requests a second, bursts of
	// 10) is one kubelet's tenth: shared by five nodes it held Pod starts
	// back for tens of seconds under the e2e suite (requests waited up to
	// 7 s). Each node gets a kubelet's default budget (50/s, bursts of
	// 100), and one more share for the rest.
	restCfg.QPS = kubeletAPIQPS * float32(cfg.Nodes+1)
	restCfg.Burst = kubeletAPIBurst * (cfg.Nodes + 1)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	err = poll(ctx, 200*time.Millisecond, "kube-apiserver to be ready", func() error {
		if apiserver.exited() {
			return fmt.Errorf("kube-apiserver exited; see %s", filepath.Join(cfg.logDir(), "kube-apiserver.log"))
		}
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}

	kcm := cp.add("kube-controller-manager", cfg.kubeBin("kube-controller-manager"),
		"--kubeconfig="+cfg.Kubeconfig(),
		"--authentication-kubeconfig="+cfg.Kubeconfig(),
		"--authorization-kubeconfig="+cfg.Kubeconfig(),
		"--service-account-private-key-file="+p.path("sa.key"),
		"--root-ca-file="+p.path("ca.crt"),
		"--cluster-signing-cert-file="+p.path("ca.crt"),
		"--cluster-signing-key-file="+p.path("ca.key"),
		"--use-service-account-credentials=true",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(cfg.Network.localPort(kcmPort)),
		"--node-monitor-grace-period=20s",
		"--cluster-name=localcluster",
	)
	scheduler := cp.add("kube-scheduler", cfg.kubeBin("kube-scheduler"),
		"--kubeconfig="+cfg.Kubeconfig(),
		"--authentication-kubeconfig="+cfg.Kubeconfig(),
		"--authorization-kubeconfig="+cfg.Kubeconfig(),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(cfg.Network.localPort(schedulerPort)),
	)
	for _, proc := range []*process{kcm, scheduler} {
		if err := proc.start(); err != nil {
			return nil, err
		}
	}
	return client, nil
}

func (cp *controlPlane) add(name, binary string, args ...string) *process {
	p := &process{name: name, argv: append([]string{binary}, args...), cfg: cp.cfg}
	cp.processes = append(cp.processes, p)
	return p
}

// check reports the first control-plane process that exited.
func (cp *controlPlane) check() error {
	for _, p := range cp.processes {
		if p.cmd != nil && p.exited() {
			return fmt.Errorf("%s exited; see %s", p.name, filepath.Join(cp.cfg.logDir(), p.name+".log"))
		}
	}
	return nil
}

// stop stops the processes in reverse order of start.
func (cp *controlPlane) stop() {
	for i := len(cp.processes) - 1; i >= 0; i-- {
		cp.processes[i].stop(10 * time.Second)
	}
}

func waitHTTP(ctx context.Context, p *process, url string) error {
	return poll(ctx, 100*time.Millisecond, p.name+" at "+url, func() error {
		if p.exited() {
			return fmt.Errorf("%s exited; see its log", p.name)
		}
		resp, err := http.Get(url) //nolint:gosec // loopback URL built here
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// writeKubeconfig writes the admin kubeconfig, pointing at kube-apiserver
// on the gateway address.
func writeKubeconfig(path string, n Network, p pki) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.path("admin.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path("admin.key"))
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(n.GatewayIP(), strconv.Itoa(APIServerPort)), CertificateAuthorityData: ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "localcluster"
	return clientcmd.WriteToFile(*kc, path)
}
