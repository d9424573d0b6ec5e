// Package localcluster runs a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler built from the Go
// module proxy) plus node agents of our own that play kubelet and container
// runtime: each Pod runs as host processes in its own network namespace
// (its own IP on a bridge) and mount namespace. It is what the e2e tests and
// `make demo` run on, on machines without a container runtime.
package localcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Network is one of the machine's local-cluster networks: its bridge,
// its pod and Service addresses, the names of its pods' network
// namespaces, the control plane's local ports and the lock of its owner.
// Local clusters on different networks run side by side (`make test` runs
// the fault campaign and the OLM suite on network 1 beside the e2e suite
// on network 0). Addresses exist only on this machine: on the bridge, in
// the pods' network namespaces, and as the bridge's /32 ClusterIPs.
//
// Network n has pods on 10.(213+2n).0.0/16 (node i on 10.(213+2n).(i+1).0/24,
// the host's gateway on .0.1) and Services on 10.(214+2n).0.0/16.
type Network int

// MaxNetwork is the highest network a local cluster can use.
const MaxNetwork Network = 9

func (n Network) podOctet() int { return 213 + 2*int(n) }

// Bridge is the Linux bridge every pod of the network is attached to. It
// also holds the ClusterIPs, as /32 addresses (the kernel here has no
// dummy links).
func (n Network) Bridge() string { return fmt.Sprintf("lcbr%d", n) }

// GatewayIP is the host's address on the bridge: pods' default route,
// their DNS server, and where kube-apiserver and the node agents listen.
func (n Network) GatewayIP() string { return fmt.Sprintf("10.%d.0.1", n.podOctet()) }

// PodNetwork holds every pod address.
func (n Network) PodNetwork() string { return fmt.Sprintf("10.%d.0.0/16", n.podOctet()) }

// ServiceNetwork holds the ClusterIPs.
func (n Network) ServiceNetwork() string { return fmt.Sprintf("10.%d.0.0/16", n.podOctet()+1) }

// KubernetesServiceIP is the ClusterIP of the kubernetes Service.
func (n Network) KubernetesServiceIP() string { return fmt.Sprintf("10.%d.0.1", n.podOctet()+1) }

// nodePodCIDR is the pod address range of node i (0-based).
func (n Network) nodePodCIDR(i int) *net.IPNet {
	_, c, _ := net.ParseCIDR(fmt.Sprintf("10.%d.%d.0/24", n.podOctet(), i+1))
	return c
}

// netnsPrefix names the pods' network namespaces ("lc-" on network 0).
func (n Network) netnsPrefix() string {
	if n == 0 {
		return "lc-"
	}
	return fmt.Sprintf("lc%d-", n)
}

// localPort is a control-plane port on 127.0.0.1, which every network
// shares: each network's are a hundred above the one before.
func (n Network) localPort(base int) int { return base + 100*int(n) }

// lockFile records which local cluster owns the network: "<pid> <state
// dir>".
func (n Network) lockFile() string {
	if n == 0 {
		return "/run/etcd-operator-localcluster.lock"
	}
	return fmt.Sprintf("/run/etcd-operator-localcluster-%d.lock", n)
}

const (
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// APIServerPort is kube-apiserver's secure port on the GatewayIP.
	APIServerPort = 6443
	// StorageClassName is the default StorageClass, provisioned by the
	// local cluster.
	StorageClassName = "standard"
	// Provisioner is the provisioner name of StorageClassName.
	Provisioner = "localcluster.etcd-operator.dev/local"
)

// Config describes a local cluster.
type Config struct {
	// StateDir holds everything the cluster writes: pki, kubeconfig, the
	// control plane's etcd data, logs, pods and volumes.
	StateDir string
	// BinDir holds the binaries built by the Makefile.
	BinDir string
	// Nodes is the number of nodes.
	Nodes int
	// KubernetesVersion selects bin/kube-*-<version>.
	KubernetesVersion string
	// EtcdVersion selects bin/etcd-<version> for the control plane.
	EtcdVersion string
	// Network is the machine's network the cluster runs on; two clusters
	// on the same network cannot run at once.
	Network Network
}

// Kubeconfig is the admin kubeconfig of the cluster.
func (c Config) Kubeconfig() string { return filepath.Join(c.StateDir, "admin.kubeconfig") }

func (c Config) pki() pki               { return pki{dir: filepath.Join(c.StateDir, "pki")} }
func (c Config) logDir() string         { return filepath.Join(c.StateDir, "logs") }
func (c Config) podsDir() string        { return filepath.Join(c.StateDir, "pods") }
func (c Config) volumesDir() string     { return filepath.Join(c.StateDir, "volumes") }
func (c Config) pidDir() string         { return filepath.Join(c.StateDir, "pids") }
func (c Config) controlSocket() string  { return filepath.Join(c.StateDir, "control.sock") }
func (c Config) readyFile() string      { return filepath.Join(c.StateDir, "ready") }
func (c Config) networkFile() string    { return filepath.Join(c.StateDir, "network") }
func (c Config) bin(name string) string { return filepath.Join(c.BinDir, name) }
func (c Config) kubeBin(name string) string {
	return c.bin(name + "-" + c.KubernetesVersion)
}

// Validate checks that the binaries the cluster runs exist.
func (c Config) Validate() error {
	if c.Nodes < 1 {
		return fmt.Errorf("nodes must be at least 1, got %d", c.Nodes)
	}
	if c.Network < 0 || c.Network > MaxNetwork {
		return fmt.Errorf("--network must be 0 to %d (one of the machine's local-cluster networks), got %d", MaxNetwork, c.Network)
	}
	for _, p := range []string{c.kubeBin("kube-apiserver"), c.kubeBin("kube-controller-manager"), c.kubeBin("kube-scheduler"), c.bin("etcd-" + c.EtcdVersion)} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s is missing: build it with `make localcluster-binaries`", p)
		}
	}
	return nil
}

// nodeName is the name of node i (0-based).
func nodeName(i int) string { return fmt.Sprintf("node-%d", i+1) }

// ReadNetwork is the network of the local cluster that runs, or ran last,
// from stateDir.
func ReadNetwork(stateDir string) (Network, error) {
	data, err := os.ReadFile(Config{StateDir: stateDir}.networkFile())
	if err != nil {
		return 0, fmt.Errorf("which network the local cluster of %s is on: %w", stateDir, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || Network(n) < 0 || Network(n) > MaxNetwork {
		return 0, fmt.Errorf("%s: not a network (0 to %d): %q", Config{StateDir: stateDir}.networkFile(), MaxNetwork, data)
	}
	return Network(n), nil
}
