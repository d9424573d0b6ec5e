package localcluster

import "testing"

// TestPodMAC: a pod's MAC follows from its address, so a pod that reuses
// an address is reached at once through the ARP entries of the last pod
// that had it, and no pod takes the bridge's MAC.
func TestPodMAC(t *testing.T) {
	t.Parallel()
	seen := map[string]string{bridgeMAC: GatewayIP}
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
