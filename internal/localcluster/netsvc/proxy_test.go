package netsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestServiceProxySync checks which listeners and addresses Sync sets up.
func TestServiceProxySync(t *testing.T) {
	t.Parallel()
	ip1, ip2, ip3 := nextClusterIP(), nextClusterIP(), nextClusterIP()
	p1, p2, p3 := freePort(t, ip1), freePort(t, ip2), freePort(t, ip3)

	tests := []struct {
		name          string
		services      []runtime.Object
		wantListeners []string
		wantAddresses []string
	}{{
		name:     "TCP ports of a ClusterIP service",
		services: []runtime.Object{makeService("default", "web").clusterIP(ip1).port("http", corev1.ProtocolTCP, p1).port("alt", "", p2).obj()},
		wantListeners: []string{
			net.JoinHostPort(ip1, strconv.Itoa(int(p1))),
			net.JoinHostPort(ip1, strconv.Itoa(int(p2))),
		},
		wantAddresses: []string{ip1},
	}, {
		name:          "UDP ports are skipped",
		services:      []runtime.Object{makeService("default", "dns").clusterIP(ip2).port("dns", corev1.ProtocolUDP, p2).obj()},
		wantAddresses: []string{},
	}, {
		name: "headless, ExternalName and unallocated services are skipped",
		services: []runtime.Object{
			makeService("default", "db").clusterIP(corev1.ClusterIPNone).port("pg", corev1.ProtocolTCP, p3).obj(),
			makeService("default", "ext").externalName("example.com").port("http", corev1.ProtocolTCP, p3).obj(),
			makeService("default", "new").port("http", corev1.ProtocolTCP, p3).obj(),
		},
		wantAddresses: []string{},
	}, {
		name:          "each service its own address",
		services:      []runtime.Object{makeService("a", "x").clusterIP(ip2).port("", "", p2).obj(), makeService("b", "y").clusterIP(ip3).port("", "", p3).obj()},
		wantListeners: []string{net.JoinHostPort(ip2, strconv.Itoa(int(p2))), net.JoinHostPort(ip3, strconv.Itoa(int(p3)))},
		wantAddresses: []string{ip2, ip3},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the rows share addresses and ports.
			l := newIndexerListers(t, tt.services...)
			addrs := newFakeAddrs()
			p := startProxy(t, l, addrs)

			if err := p.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := p.listenAddrs(); !slices.Equal(got, slices.Sorted(slices.Values(tt.wantListeners))) {
				t.Errorf("listeners = %q, want %q", got, tt.wantListeners)
			}
			if got := addrs.list(); !slices.Equal(got, slices.Sorted(slices.Values(tt.wantAddresses))) {
				t.Errorf("addresses = %q, want %q", got, tt.wantAddresses)
			}
		})
	}
}

// TestServiceProxyForwards checks forwarding, half-close, round robin,
// failover and connections without endpoints, each against a Service of its
// own whose endpoints are echo servers on 127.0.0.1.
func TestServiceProxyForwards(t *testing.T) {
	t.Parallel()
	dead := deadEndpoint(t)
	tests := []struct {
		name      string
		endpoints func(t *testing.T) []runtime.Object // EndpointSlices of Service default/web
		conns     int
		want      []string // replies, any order
	}{{
		name:      "one endpoint, request and reply across half-close",
		endpoints: func(t *testing.T) []runtime.Object { return []runtime.Object{echoSlice(t, "web-a", "a", true)} },
		conns:     2,
		want:      []string{"a:hello", "a:hello"},
	}, {
		name: "round robin over ready endpoints",
		endpoints: func(t *testing.T) []runtime.Object {
			return []runtime.Object{echoSlice(t, "web-a", "a", true), echoSlice(t, "web-b", "b", true)}
		},
		conns: 4,
		want:  []string{"a:hello", "a:hello", "b:hello", "b:hello"},
	}, {
		name: "not-ready endpoints get no traffic",
		endpoints: func(t *testing.T) []runtime.Object {
			return []runtime.Object{echoSlice(t, "web-a", "a", true), echoSlice(t, "web-b", "b", false)}
		},
		conns: 3,
		want:  []string{"a:hello", "a:hello", "a:hello"},
	}, {
		name: "fails over from a dead endpoint",
		endpoints: func(t *testing.T) []runtime.Object {
			return []runtime.Object{
				makeSlice("default", "web-dead", "web").port("http", dead).endpoint("127.0.0.1", "", true).obj(),
				echoSlice(t, "web-a", "a", true),
			}
		},
		conns: 4,
		want:  []string{"a:hello", "a:hello", "a:hello", "a:hello"},
	}, {
		name:      "no endpoint closes the connection",
		endpoints: func(*testing.T) []runtime.Object { return nil },
		conns:     1,
		want:      []string{""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := nextClusterIP()
			port := freePort(t, ip)
			svc := makeService("default", "web").clusterIP(ip).port("http", corev1.ProtocolTCP, port).obj()
			l := newIndexerListers(t, append(tt.endpoints(t), svc)...)
			p := startProxy(t, l, newFakeAddrs())
			if err := p.Sync(); err != nil {
				t.Fatal(err)
			}

			var got []string
			for range tt.conns {
				reply, err := exchange(net.JoinHostPort(ip, strconv.Itoa(int(port))), "hello")
				if err != nil && !closedByPeer(err) {
					t.Fatal(err)
				}
				got = append(got, reply)
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
				t.Errorf("replies = %q, want %q", got, want)
			}
		})
	}
}

// TestServiceProxyFollowsChanges checks that the proxy re-targets when
// endpoints change, without a Sync, and stops listening and drops the
// address when the Service is deleted.
func TestServiceProxyFollowsChanges(t *testing.T) {
	t.Parallel()
	ip := nextClusterIP()
	port := freePort(t, ip)
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	svc := makeService("default", "web").clusterIP(ip).port("http", corev1.ProtocolTCP, port).obj()
	l := newIndexerListers(t, svc, echoSlice(t, "web-1", "a", true))
	addrs := newFakeAddrs()
	p := startProxy(t, l, addrs)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	assertReply(t, addr, "a:hello")

	l.add(t, echoSlice(t, "web-1", "b", true)) // same slice, new endpoint
	assertReply(t, addr, "b:hello")

	l.remove(t, svc)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := refused(addr)(); err != nil {
		t.Errorf("after the Service is deleted: %v", err)
	}
	if got := addrs.list(); len(got) != 0 {
		t.Errorf("after the Service is deleted: addresses = %q, want none", got)
	}
}

// TestServiceProxyRun drives the proxy through Run from informer events of a
// fake clientset: Service added, endpoints changed, Service deleted, and
// checks what Run leaves behind when its context ends.
func TestServiceProxyRun(t *testing.T) {
	t.Parallel()
	ip, otherIP := nextClusterIP(), nextClusterIP()
	port, otherPort := freePort(t, ip), freePort(t, otherIP)
	addr, otherAddr := net.JoinHostPort(ip, strconv.Itoa(int(port))), net.JoinHostPort(otherIP, strconv.Itoa(int(otherPort)))
	client := fake.NewClientset(makeService("default", "other").clusterIP(otherIP).port("", "", otherPort).obj())
	watching := watchStarted(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	services := factory.Core().V1().Services()
	endpointSlices := factory.Discovery().V1().EndpointSlices()
	addrs := newFakeAddrs()
	p := NewServiceProxy(services.Lister(), endpointSlices.Lister(), addrs)
	trigger := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.Trigger() },
		UpdateFunc: func(any, any) { p.Trigger() },
		DeleteFunc: func(any) { p.Trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{services.Informer(), endpointSlices.Informer()} {
		if _, err := inf.AddEventHandler(trigger); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	t.Cleanup(cancel)
	factory.WaitForCacheSync(ctx.Done())
	awaitWatches(t, watching, 2)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		p.Run(ctx, time.Hour) // only Trigger can make it sync in time
	}()

	create(t, client, echoSlice(t, "web-1", "a", true))
	create(t, client, makeService("default", "web").clusterIP(ip).port("http", corev1.ProtocolTCP, port).obj())
	eventually(t, "the new Service to forward to endpoint a", replyIs(addr, "a:hello"))
	// Listening since the first Sync, but without endpoints.
	if reply, err := exchange(otherAddr, "hello"); reply != "" || (err != nil && !closedByPeer(err)) {
		t.Errorf("Service default/other without endpoints: reply %q, error %v; want the connection closed", reply, err)
	}

	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, echoSlice(t, "web-1", "b", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service to forward to endpoint b", replyIs(addr, "b:hello"))

	held := holdConnection(t, addr) // a connection open across shutdown
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted Service's listener to close", refused(addr))

	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
	if _, err := io.ReadAll(held); err != nil && !isReset(err) {
		t.Errorf("connection open across shutdown: %v, want it closed", err)
	}
	if err := refused(otherAddr)(); err != nil {
		t.Errorf("after Run, Service default/other: %v", err)
	}
	if got := addrs.list(); len(got) != 0 {
		t.Errorf("after Run: addresses = %q, want none", got)
	}
	if err := p.Sync(); err == nil {
		t.Error("Sync after Run returned nil, want an error")
	}
}

// TestTriggerDoesNotBlock checks that Trigger returns with nobody running.
func TestTriggerDoesNotBlock(t *testing.T) {
	t.Parallel()
	p := NewServiceProxy(newIndexerListers(t).serviceLister(), newIndexerListers(t).sliceLister(), newFakeAddrs())
	for range 3 {
		p.Trigger()
	}
}

// clusterIPs hands out loopback addresses no other test uses.
var clusterIPs atomic.Uint32

// nextClusterIP returns a loopback address for a test's ClusterIP.
func nextClusterIP() string {
	n := clusterIPs.Add(1)
	return fmt.Sprintf("127.77.%d.%d", n/250, n%250+1)
}

// freePort returns a TCP port that was free on ip a moment ago.
func freePort(t *testing.T, ip string) int32 {
	t.Helper()
	l, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// deadEndpoint returns a port on 127.0.0.1 that refuses connections.
func deadEndpoint(t *testing.T) int32 {
	return freePort(t, "127.0.0.1")
}

// echoSlice starts an echo server called id on 127.0.0.1 and returns an
// EndpointSlice of Service default/web, port "http", with it as only endpoint.
func echoSlice(t *testing.T, name, id string, ready bool) *discoveryv1.EndpointSlice {
	t.Helper()
	port := startEcho(t, id)
	return makeSlice("default", name, "web").port("http", port).endpoint("127.0.0.1", "", ready).obj()
}

// startEcho starts a server on 127.0.0.1 that reads each connection to its
// end, replies "<id>:<what it read>" and closes. It stops when the test ends.
func startEcho(t *testing.T, id string) int32 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				data, err := io.ReadAll(c)
				if err == nil {
					_, _ = c.Write([]byte(id + ":" + string(data)))
				}
			}()
		}
	}()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// exchange sends msg to addr, closes its sending side and returns all it
// reads until the server closes.
func exchange(addr, msg string) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(c)
	return string(reply), err
}

// replyIs returns a condition that holds when addr replies want to "hello".
func replyIs(addr, want string) func() error {
	return func() error {
		got, err := exchange(addr, "hello")
		if err == nil && got != want {
			err = fmt.Errorf("reply %q, want %q", got, want)
		}
		return err
	}
}

// refused returns a condition that holds when connecting to addr is refused.
func refused(addr string) func() error {
	return func() error {
		_, err := exchange(addr, "hello")
		switch {
		case isRefused(err):
			return nil
		case err == nil:
			return errors.New("connection accepted, want refused")
		}
		return fmt.Errorf("want connection refused: %w", err)
	}
}

// assertReply checks that addr replies want to "hello".
func assertReply(t *testing.T, addr, want string) {
	t.Helper()
	if err := replyIs(addr, want)(); err != nil {
		t.Error(err)
	}
}

// holdConnection opens a proxied connection to addr that stays open: it
// sends without closing its sending side, so the echo server keeps reading.
func holdConnection(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	return c
}

// isRefused reports whether err is a refused connection.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}

// closedByPeer reports whether err is the peer closing the connection
// before reading all that was sent: a reset, seen on reading or writing.
func closedByPeer(err error) bool {
	return isReset(err) || errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.EPIPE)
}

// fakeAddrs is an AddressManager that only records the addresses it holds.
type fakeAddrs struct {
	mu  sync.Mutex
	ips map[string]bool
}

// newFakeAddrs returns an empty fakeAddrs.
func newFakeAddrs() *fakeAddrs { return &fakeAddrs{ips: map[string]bool{}} }

// Add records ip.
func (f *fakeAddrs) Add(ip string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ips[ip] = true
	return nil
}

// Remove forgets ip.
func (f *fakeAddrs) Remove(ip string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ips, ip)
	return nil
}

// list returns the addresses held, sorted.
func (f *fakeAddrs) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []string{}
	for ip := range f.ips {
		out = append(out, ip)
	}
	slices.Sort(out)
	return out
}

// startProxy returns a proxy over l's listers that is shut down when the test ends.
func startProxy(t *testing.T, l *indexerListers, addrs AddressManager) *ServiceProxy {
	t.Helper()
	p := NewServiceProxy(l.serviceLister(), l.sliceLister(), addrs)
	t.Cleanup(func() { p.shutdown(p.log) })
	return p
}

// listenAddrs returns the addresses p listens on, sorted.
func (p *ServiceProxy) listenAddrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for a := range p.listeners {
		out = append(out, a.String())
	}
	slices.Sort(out)
	return out
}

// watchStarted makes client report each watch it starts on the returned
// channel: the fake clientset ignores resource versions, so an informer
// misses what changes between its list and its watch.
func watchStarted(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{}, 10)
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		opts := metav1.ListOptions{}
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		started <- struct{}{}
		return true, w, nil
	})
	return started
}

// awaitWatches waits for n watches to start.
func awaitWatches(t *testing.T, started <-chan struct{}, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for informer watch %d of %d to start", i+1, n)
		}
	}
}

// create creates o, a Service or an EndpointSlice, through client.
func create(t *testing.T, client *fake.Clientset, o runtime.Object) {
	t.Helper()
	var err error
	switch o := o.(type) {
	case *corev1.Service:
		_, err = client.CoreV1().Services(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = client.DiscoveryV1().EndpointSlices(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unexpected fixture type %T", o)
	}
	if err != nil {
		t.Fatal(err)
	}
}
