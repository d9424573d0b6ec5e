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
)

// Network layout. Pod and Service addresses exist only on this machine: on
// the bridge, in the pods' network namespaces and on a dummy link.
const (
	// BridgeName is the Linux bridge every pod is attached to.
	BridgeName = "lcbr0"
	// ServiceLinkName is the link that holds the ClusterIPs, as /32
	// addresses: the bridge itself (the kernel here has no dummy links).
	ServiceLinkName = BridgeName
	// GatewayIP is the host's address on the bridge: pods' default route,
	// their DNS server, and where kube-apiserver listens.
	GatewayIP = "10.213.0.1"
	// PodNetwork holds every pod address; node N gets 10.213.N.0/24.
	PodNetwork = "10.213.0.0/16"
	// ServiceNetwork holds the ClusterIPs.
	ServiceNetwork = "10.214.0.0/16"
	// KubernetesServiceIP is the ClusterIP of the kubernetes Service.
	KubernetesServiceIP = "10.214.0.1"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// APIServerPort is kube-apiserver's secure port on GatewayIP.
	APIServerPort = 6443
	// netnsPrefix names the pods' network namespaces.
	netnsPrefix = "lc-"
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
func (c Config) bin(name string) string { return filepath.Join(c.BinDir, name) }
func (c Config) kubeBin(name string) string {
	return c.bin(name + "-" + c.KubernetesVersion)
}

// Validate checks that the binaries the cluster runs exist.
func (c Config) Validate() error {
	if c.Nodes < 1 {
		return fmt.Errorf("nodes must be at least 1, got %d", c.Nodes)
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

// nodePodCIDR is the pod address range of node i (0-based).
func nodePodCIDR(i int) *net.IPNet {
	_, n, _ := net.ParseCIDR(fmt.Sprintf("10.213.%d.0/24", i+1))
	return n
}
