package localcluster

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestPodMAC: a pod's MAC follows from its address, so a pod that reuses
// an address is reached at once through the ARP entries of the last pod
// that had it, and no pod takes the bridge's MAC.
func TestPodMAC(t *testing.T) {
	t.Parallel()
	seen := map[string]string{Network(0).bridgeMAC(): Network(0).GatewayIP()}
	for _, ip := range []string{"10.213.1.2", "10.213.1.3", "10.213.2.2", "10.213.5.254"} {
		mac := podMAC(ip)
		if other, ok := seen[mac]; ok {
			t.Errorf("%s and %s share the MAC %s", ip, other, mac)
		}
		seen[mac] = ip
		if again := podMAC(ip); again != mac {
			t.Errorf("%s got %s, then %s", ip, mac, again)
		}
	}
	if got := podMAC("10.213.1.2"); got != "02:00:0a:d5:01:02" {
		t.Errorf("podMAC(10.213.1.2) = %s", got)
	}
}

// TestNetworksAreApart: local clusters on different networks share no
// name, address range, local port or lock, and the cleanup of one (every
// network namespace with its prefix) never matches another's namespaces.
// Network 0 keeps the names and addresses the docs give.
func TestNetworksAreApart(t *testing.T) {
	t.Parallel()
	if n := Network(0); n.Bridge() != "lcbr0" || n.GatewayIP() != "10.213.0.1" || n.PodNetwork() != "10.213.0.0/16" ||
		n.ServiceNetwork() != "10.214.0.0/16" || n.KubernetesServiceIP() != "10.214.0.1" || n.netnsPrefix() != "lc-" || n.bridgeMAC() != "02:00:0a:d5:00:01" {
		t.Errorf("network 0 moved: %s %s %s %s %s %s %s", n.Bridge(), n.GatewayIP(), n.PodNetwork(), n.ServiceNetwork(), n.KubernetesServiceIP(), n.netnsPrefix(), n.bridgeMAC())
	}
	owner := map[string]Network{}
	claim := func(n Network, what, v string) {
		t.Helper()
		if o, ok := owner[what+" "+v]; ok && o != n {
			t.Errorf("networks %d and %d share %s %s", o, n, what, v)
		}
		owner[what+" "+v] = n
	}
	var ranges []*net.IPNet
	for n := Network(0); n <= MaxNetwork; n++ {
		claim(n, "bridge", n.Bridge())
		claim(n, "bridge MAC", n.bridgeMAC())
		claim(n, "lock", n.lockFile())
		for _, p := range []int{etcdClientPort, etcdPeerPort, kcmPort, schedulerPort} {
			claim(n, "port", strconv.Itoa(n.localPort(p)))
		}
		for _, c := range []string{n.PodNetwork(), n.ServiceNetwork()} {
			_, r, err := net.ParseCIDR(c)
			if err != nil {
				t.Fatal(err)
			}
			ranges = append(ranges, r)
		}
		for i := range 5 {
			if c := n.nodePodCIDR(i); !mustCIDR(t, n.PodNetwork()).Contains(c.IP) {
				t.Errorf("network %d: node %d's %s is outside %s", n, i, c, n.PodNetwork())
			}
		}
		if !mustCIDR(t, n.PodNetwork()).Contains(net.ParseIP(n.GatewayIP())) || !mustCIDR(t, n.ServiceNetwork()).Contains(net.ParseIP(n.KubernetesServiceIP())) {
			t.Errorf("network %d: gateway %s or kubernetes Service %s outside its range", n, n.GatewayIP(), n.KubernetesServiceIP())
		}
		for m := Network(0); m <= MaxNetwork; m++ {
			if m != n && strings.HasPrefix(m.netnsPrefix()+"0123456789ab", n.netnsPrefix()) {
				t.Errorf("network %d's cleanup (prefix %q) would remove network %d's namespaces (%q)", n, n.netnsPrefix(), m, m.netnsPrefix())
			}
		}
	}
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.Contains(b.IP) || b.Contains(a.IP) {
				t.Errorf("%s and %s overlap", a, b)
			}
		}
	}
}

func mustCIDR(t *testing.T, c string) *net.IPNet {
	t.Helper()
	_, r, err := net.ParseCIDR(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
