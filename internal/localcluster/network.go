package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// bridgeMAC is the bridge's own, fixed MAC address, the gateway address's
// (podMAC). Without it a bridge takes the lowest MAC of its ports, and
// changes it when that pod goes: every other pod then sends to the
// gateway's old MAC until its ARP entry expires, a minute of silence to
// the API server and the ClusterIPs.
func (n Network) bridgeMAC() string { return podMAC(n.GatewayIP()) }

// setupHostNetwork creates the bridge the pods attach to, with the gateway
// address; the ClusterIPs are added to it as they appear.
func setupHostNetwork(ctx context.Context, n Network) error {
	steps := [][]string{
		{"link", "add", n.Bridge(), "address", n.bridgeMAC(), "type", "bridge"},
		{"addr", "add", n.GatewayIP() + "/16", "dev", n.Bridge()},
		{"link", "set", n.Bridge(), "up"},
	}
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("setting up the host network: %w", err)
		}
	}
	return nil
}

// cleanupHostNetwork removes every network namespace, link and address a
// local cluster on network n creates; it is safe to call when some or all
// are gone.
func cleanupHostNetwork(ctx context.Context, n Network) {
	for _, ns := range listNetns() {
		if strings.HasPrefix(ns, n.netnsPrefix()) {
			_ = run(ctx, "ip", "netns", "del", ns)
		}
	}
	if linkExists(n.Bridge()) {
		_ = run(ctx, "ip", "link", "del", n.Bridge())
	}
}

func listNetns() []string {
	entries, _ := os.ReadDir("/run/netns")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}

// podNetwork is a pod's network namespace and its address.
type podNetwork struct {
	netns    string // name under /run/netns
	hostVeth string // the host end of the pod's veth pair
	ip       string
	host     Network
}

func newPodNetwork(host Network, podUID, ip string) podNetwork {
	id := podNetworkID(podUID)
	return podNetwork{netns: host.netnsPrefix() + id, hostVeth: "lcv" + id, ip: ip, host: host}
}

// podNetworkID names the network of the Pod of UID podUID.
func podNetworkID(podUID string) string {
	id := strings.ReplaceAll(podUID, "-", "")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// PodNetnsPath is the network namespace of the Pod of UID podUID while it
// runs on a node: it is removed, with every socket in it, once the Pod is
// gone.
func (n Network) PodNetnsPath(podUID string) string {
	return "/run/netns/" + n.netnsPrefix() + podNetworkID(podUID)
}

func (n podNetwork) netnsPath() string { return "/run/netns/" + n.netns }

// setup creates the namespace, a veth pair into it attached to the bridge,
// the pod's address and its default route through the gateway. It is
// idempotent: a namespace left by an earlier attempt is replaced.
func (n podNetwork) setup(ctx context.Context) error {
	n.teardown(ctx)
	steps := [][]string{
		{"netns", "add", n.netns},
		{"link", "add", n.hostVeth, "type", "veth", "peer", "name", "eth0", "address", podMAC(n.ip), "netns", n.netns},
		{"link", "set", n.hostVeth, "master", n.host.Bridge(), "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "addr", "add", n.ip + "/16", "dev", "eth0"},
		{"-n", n.netns, "link", "set", "eth0", "up"},
		{"-n", n.netns, "route", "add", "default", "via", n.host.GatewayIP()},
	}
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("setting up the pod network: %w", err)
		}
	}
	return nil
}

// podMAC is the MAC address of a pod's eth0, derived from its IP
// address (02:00 and the address's four bytes). Pod addresses are
// reused: with a MAC of its own, a new pod on an old address would get
// no traffic from the host (its probes, the API server's proxy) nor from
// other pods until their ARP entries for the old pod's MAC expired, about
// 30 s, and each bootstrap took that long more whenever it happened.
func podMAC(ip string) string {
	v4 := net.ParseIP(ip).To4()
	if v4 == nil {
		return ""
	}
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", v4[0], v4[1], v4[2], v4[3])
}

// teardown deletes the namespace (and with it the veth pair).
func (n podNetwork) teardown(ctx context.Context) {
	if _, err := os.Stat(n.netnsPath()); err == nil {
		_ = run(ctx, "ip", "netns", "del", n.netns)
	}
	if linkExists(n.hostVeth) {
		_ = run(ctx, "ip", "link", "del", n.hostVeth)
	}
}

// cut takes the pod off the network: its veth goes down on the host side,
// so nothing reaches it and it reaches nothing.
func (n podNetwork) cut(ctx context.Context) error {
	return run(ctx, "ip", "link", "set", n.hostVeth, "down")
}

// heal brings a cut pod back.
func (n podNetwork) heal(ctx context.Context) error {
	return run(ctx, "ip", "link", "set", n.hostVeth, "up")
}
