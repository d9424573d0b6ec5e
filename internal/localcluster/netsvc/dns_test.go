package netsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// dnsFixtures are the objects the DNS table test resolves against.
func dnsFixtures() []runtime.Object {
	return []runtime.Object{
		makeService("default", "web").clusterIP("10.96.0.10").port("http", corev1.ProtocolTCP, 80).port("dns", corev1.ProtocolUDP, 53).obj(),
		makeService("other", "web").clusterIP("10.96.0.20").port("http", "", 80).obj(),
		makeService("default", "db").clusterIP(corev1.ClusterIPNone).port("pg", corev1.ProtocolTCP, 5432).obj(),
		makeSlice("default", "db-abc", "db").port("pg", 15432).
			endpoint("10.244.0.5", "db-0", true).
			endpoint("10.244.0.6", "db-1", false).
			endpoint("10.244.0.7", "", true).obj(),
		makeService("default", "peers").clusterIP(corev1.ClusterIPNone).publishNotReady().obj(),
		makeSlice("default", "peers-abc", "peers").
			endpoint("10.244.1.1", "peer-0", true).
			endpoint("10.244.1.2", "peer-1", false).obj(),
		makeService("default", "empty").clusterIP(corev1.ClusterIPNone).obj(),
		makeService("default", "ext").externalName("example.com").obj(),
	}
}

// TestDNS resolves names over UDP against a real server.
func TestDNS(t *testing.T) {
	t.Parallel()
	l := newIndexerListers(t, dnsFixtures()...)
	udpAddr, _ := startDNS(t, NewDNS("cluster.local", l.serviceLister(), l.sliceLister()))

	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		wantRcode int
		wantAA    bool
		want      []string // answers as "TYPE data", any order
		wantExtra []string
	}{{
		name:  "ClusterIP service",
		qname: "web.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.96.0.10"},
	}, {
		name:  "names are case-insensitive",
		qname: "WEB.Default.SVC.Cluster.Local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.96.0.10"},
	}, {
		name:  "same service name in another namespace",
		qname: "web.other.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.96.0.20"},
	}, {
		name:  "AAAA of a known name is empty",
		qname: "web.default.svc.cluster.local.", qtype: dns.TypeAAAA,
		wantRcode: dns.RcodeSuccess, wantAA: true,
	}, {
		name:  "headless service has its ready endpoints only",
		qname: "db.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.0.5", "A 10.244.0.7"},
	}, {
		name:  "headless service with publishNotReadyAddresses has all endpoints",
		qname: "peers.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.1.1", "A 10.244.1.2"},
	}, {
		name:  "headless service without endpoints exists",
		qname: "empty.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true,
	}, {
		name:  "endpoint hostname",
		qname: "db-0.db.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.0.5"},
	}, {
		name:  "hostname of a not-ready endpoint is unknown",
		qname: "db-1.db.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError, wantAA: true,
	}, {
		name:  "hostname of a not-ready endpoint with publishNotReadyAddresses",
		qname: "peer-1.peers.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.1.2"},
	}, {
		name:  "endpoint without hostname by its dashed address",
		qname: "10-244-0-7.db.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.0.7"},
	}, {
		name:  "SRV of a ClusterIP service port",
		qname: "_http._tcp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
		wantRcode: dns.RcodeSuccess, wantAA: true,
		want:      []string{"SRV 0 100 80 web.default.svc.cluster.local."},
		wantExtra: []string{"A 10.96.0.10"},
	}, {
		name:  "SRV of a headless service port uses endpoint names and ports",
		qname: "_pg._tcp.db.default.svc.cluster.local.", qtype: dns.TypeSRV,
		wantRcode: dns.RcodeSuccess, wantAA: true,
		want:      []string{"SRV 0 50 15432 db-0.db.default.svc.cluster.local.", "SRV 0 50 15432 10-244-0-7.db.default.svc.cluster.local."},
		wantExtra: []string{"A 10.244.0.5", "A 10.244.0.7"},
	}, {
		name:  "SRV of the service name has every port",
		qname: "web.default.svc.cluster.local.", qtype: dns.TypeSRV,
		wantRcode: dns.RcodeSuccess, wantAA: true,
		want:      []string{"SRV 0 50 80 web.default.svc.cluster.local.", "SRV 0 50 53 web.default.svc.cluster.local."},
		wantExtra: []string{"A 10.96.0.10"},
	}, {
		name:  "SRV with the wrong protocol",
		qname: "_http._udp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
		wantRcode: dns.RcodeNameError, wantAA: true,
	}, {
		name:  "ExternalName service",
		qname: "ext.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"CNAME example.com."},
	}, {
		name:  "pod by dashed address",
		qname: "10-244-3-4.default.pod.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true, want: []string{"A 10.244.3.4"},
	}, {
		name:  "namespace with services exists",
		qname: "default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeSuccess, wantAA: true,
	}, {
		name:  "zone apex SOA",
		qname: "cluster.local.", qtype: dns.TypeSOA,
		wantRcode: dns.RcodeSuccess, wantAA: true,
		want: []string{"SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"},
	}, {
		name:  "unknown service",
		qname: "nope.default.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError, wantAA: true,
	}, {
		name:  "unknown namespace",
		qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError, wantAA: true,
	}, {
		name:  "unknown kind of name in the zone",
		qname: "web.default.cluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError, wantAA: true,
	}, {
		name:  "name outside the domain is not forwarded",
		qname: "example.com.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError,
	}, {
		name:  "name that merely ends like the domain",
		qname: "web.default.svc.xcluster.local.", qtype: dns.TypeA,
		wantRcode: dns.RcodeNameError,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := query(udpAddr, "udp", tt.qname, tt.qtype)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tt.wantRcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.wantRcode])
			}
			if r.Authoritative != tt.wantAA {
				t.Errorf("authoritative = %v, want %v", r.Authoritative, tt.wantAA)
			}
			assertRecords(t, "answer", r.Answer, tt.want)
			assertRecords(t, "extra", r.Extra, tt.wantExtra)
			if tt.wantAA && len(r.Answer) == 0 && len(r.Ns) == 0 {
				t.Errorf("negative answer carries no SOA")
			}
		})
	}
}

// TestDNSTTLAndTCP checks the TTL and that TCP answers as UDP does.
func TestDNSTTLAndTCP(t *testing.T) {
	t.Parallel()
	l := newIndexerListers(t, dnsFixtures()...)
	_, tcpAddr := startDNS(t, NewDNS("cluster.local.", l.serviceLister(), l.sliceLister()))

	r, err := query(tcpAddr, "tcp", "db.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "answer", r.Answer, []string{"A 10.244.0.5", "A 10.244.0.7"})
	for _, rr := range r.Answer {
		if rr.Header().Ttl != 5 {
			t.Errorf("TTL of %s = %d, want 5", rr, rr.Header().Ttl)
		}
	}
}

// TestDNSFollowsListers checks that answers change with the listers' objects.
func TestDNSFollowsListers(t *testing.T) {
	t.Parallel()
	slice := makeSlice("default", "db-abc", "db").port("pg", 5432).endpoint("10.244.0.5", "db-0", false)
	l := newIndexerListers(t, makeService("default", "db").clusterIP(corev1.ClusterIPNone).obj(), slice.obj())
	udpAddr, _ := startDNS(t, NewDNS("cluster.local", l.serviceLister(), l.sliceLister()))

	r, err := query(udpAddr, "udp", "db-0.db.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeNameError {
		t.Fatalf("before the endpoint is ready: rcode = %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	l.add(t, makeSlice("default", "db-abc", "db").port("pg", 5432).endpoint("10.244.0.5", "db-0", true).obj())
	r, err = query(udpAddr, "udp", "db-0.db.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "answer once ready", r.Answer, []string{"A 10.244.0.5"})
}

// TestDNSTruncatesOverUDP checks that a headless Service with many endpoints
// sets TC over UDP and is answered in full over TCP.
func TestDNSTruncatesOverUDP(t *testing.T) {
	t.Parallel()
	slice := makeSlice("default", "big-abc", "big")
	for i := range 100 {
		slice.endpoint(fmt.Sprintf("10.244.2.%d", i), "", true)
	}
	l := newIndexerListers(t, makeService("default", "big").clusterIP(corev1.ClusterIPNone).obj(), slice.obj())
	udpAddr, tcpAddr := startDNS(t, NewDNS("cluster.local", l.serviceLister(), l.sliceLister()))

	r, err := query(udpAddr, "udp", "big.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated {
		t.Errorf("UDP answer with %d records is not truncated", len(r.Answer))
	}
	r, err = query(tcpAddr, "tcp", "big.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 100 || r.Truncated {
		t.Errorf("TCP answer has %d records, truncated %v; want 100, false", len(r.Answer), r.Truncated)
	}
}

// TestDNSServe checks that Serve answers over UDP and TCP on one port and
// returns nil once its context is done.
func TestDNSServe(t *testing.T) {
	t.Parallel()
	l := newIndexerListers(t, dnsFixtures()...)
	d := NewDNS("cluster.local", l.serviceLister(), l.sliceLister())
	addr := freeUDPAndTCPAddr(t)

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, addr) }()
	for _, network := range []string{"udp", "tcp"} {
		eventually(t, network+" answer from Serve on "+addr, func() error {
			r, err := query(addr, network, "web.default.svc.cluster.local.", dns.TypeA)
			if err == nil && len(r.Answer) != 1 {
				err = fmt.Errorf("answer %v", r.Answer)
			}
			return err
		})
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of cancel")
	}
}

// TestDNSServeBadAddress checks that Serve fails at once on an unusable address.
func TestDNSServeBadAddress(t *testing.T) {
	t.Parallel()
	d := NewDNS("cluster.local", newIndexerListers(t).serviceLister(), newIndexerListers(t).sliceLister())
	if err := d.Serve(t.Context(), "127.0.0.1"); err == nil {
		t.Error("Serve on an address without port returned nil")
	}
}

// TestListenUDPAndTCP checks that port 0 gives UDP and TCP the same port.
func TestListenUDPAndTCP(t *testing.T) {
	t.Parallel()
	pc, l, err := listenUDPAndTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Close() }()
	defer func() { _ = l.Close() }()
	if u, tc := pc.LocalAddr().(*net.UDPAddr).Port, l.Addr().(*net.TCPAddr).Port; u != tc {
		t.Errorf("UDP port %d != TCP port %d", u, tc)
	}
}

// startDNS serves d on fresh UDP and TCP sockets on 127.0.0.1 until the test
// ends and returns their addresses.
func startDNS(t *testing.T, d *DNS) (udpAddr, tcpAddr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.ServeConns(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeConns: %v", err)
		}
	})
	return pc.LocalAddr().String(), l.Addr().String()
}

// freeUDPAndTCPAddr returns a 127.0.0.1 address whose port was free for both
// UDP and TCP a moment ago.
func freeUDPAndTCPAddr(t *testing.T) string {
	t.Helper()
	pc, l, err := listenUDPAndTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = pc.Close()
	_ = l.Close()
	return addr
}

// query asks the server at addr over network for qname's qtype records.
func query(addr, network, qname string, qtype uint16) (*dns.Msg, error) {
	c := dns.Client{Net: network, Timeout: 5 * time.Second}
	m := new(dns.Msg).SetQuestion(qname, qtype)
	r, _, err := c.Exchange(m, addr)
	if err == nil && r.Id != m.Id {
		err = errors.New("reply ID does not match the query's")
	}
	return r, err
}

// assertRecords checks that rrs are want, written "TYPE data", in any order.
func assertRecords(t *testing.T, section string, rrs []dns.RR, want []string) {
	t.Helper()
	var got []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		data := strings.TrimPrefix(rr.String(), rr.Header().String())
		got = append(got, dns.TypeToString[rr.Header().Rrtype]+" "+data)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", section, got, want)
	}
}
