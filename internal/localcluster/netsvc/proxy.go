package netsvc

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

// dialTimeout bounds each attempt to connect to one endpoint.
const dialTimeout = 2 * time.Second

// AddressManager assigns to the host the ClusterIPs the proxy listens on, and
// withdraws them. Production uses IPAddrManager; tests use a no-op with
// loopback addresses.
type AddressManager interface {
	// Add assigns ip to the host; an address already assigned is no error.
	Add(ip string) error
	// Remove withdraws ip from the host; an address already gone is no error.
	Remove(ip string) error
}

// ServiceProxy makes every ClusterIP Service reachable on its ClusterIP and ports by accepting TCP connections there and forwarding them to a ready endpoint.
//
// It is a userspace kube-proxy for TCP and IPv4. Sync opens and closes the
// listeners; endpoints are looked up afresh for every accepted connection, so
// endpoint changes need no Sync. Connections already forwarded are left alone
// when their Service goes away, and closed when Run ends. A ServiceProxy runs
// once: after Run has returned, Sync fails.
type ServiceProxy struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	addrs    AddressManager
	log      logr.Logger
	trigger  chan struct{}

	// stopCtx is cancelled when Run ends; it aborts dials in progress.
	stopCtx context.Context
	stop    context.CancelFunc

	mu        sync.Mutex
	listeners map[listenAddr]*portListener
	assigned  map[string]bool // addresses added through addrs and not removed since

	connMu sync.Mutex
	conns  map[net.Conn]struct{} // open client and endpoint connections

	wg sync.WaitGroup // accept loops and connection handlers
}

// listenAddr is a ClusterIP and port the proxy listens on.
type listenAddr struct {
	ip   string
	port int32
}

// String returns a host:port.
func (a listenAddr) String() string {
	return net.JoinHostPort(a.ip, strconv.Itoa(int(a.port)))
}

// servicePort is the Service port a listener forwards to.
type servicePort struct {
	namespace, service string
	port               string // the Service port's name, which the EndpointSlice port shares
}

// portListener is an open listener and the Service port it forwards to.
type portListener struct {
	ln     net.Listener
	target atomic.Pointer[servicePort]
	next   atomic.Uint32 // round-robin position
}

// NewServiceProxy returns a ServiceProxy that reads Services and EndpointSlices from the
// given listers and assigns ClusterIPs to the host with addrs.
func NewServiceProxy(services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister, addrs AddressManager) *ServiceProxy {
	stopCtx, stop := context.WithCancel(context.Background())
	return &ServiceProxy{
		services:  services,
		slices:    slices,
		addrs:     addrs,
		log:       klog.Background().WithName("service-proxy"),
		trigger:   make(chan struct{}, 1),
		stopCtx:   stopCtx,
		stop:      stop,
		listeners: map[listenAddr]*portListener{},
		assigned:  map[string]bool{},
		conns:     map[net.Conn]struct{}{},
	}
}

// Trigger asks Run for a Sync without waiting for it. Requests made while a
// Sync is pending are merged into it.
func (p *ServiceProxy) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Run syncs at once, then on every resync tick (none if resync <= 0) and on
// every Trigger, until ctx is done. It then closes all listeners and proxied
// connections, waits for their goroutines and removes the addresses it added.
func (p *ServiceProxy) Run(ctx context.Context, resync time.Duration) {
	log := klog.FromContext(ctx)
	defer p.shutdown(log)
	var tick <-chan time.Time
	if resync > 0 {
		ticker := time.NewTicker(resync)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		if err := p.Sync(); err != nil {
			log.Error(err, "Failed to sync service proxy")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-p.trigger:
		}
	}
}

// Sync re-derives the listeners from the Services: one per TCP port of each
// IPv4 ClusterIP (headless and ExternalName Services have none). It closes
// listeners no Service wants, removes addresses no listener needs, then adds
// addresses and opens listeners. It keeps going past failures and returns them
// all; the next Sync retries.
func (p *ServiceProxy) Sync() error {
	desired, err := p.desiredListeners()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopCtx.Err() != nil {
		return errors.New("service proxy has stopped")
	}
	p.closeUnwanted(desired)
	errs := p.removeUnusedAddresses(desired)
	errs = append(errs, p.openWanted(desired)...)
	return errors.Join(errs...)
}

// desiredListeners returns the Service port each listen address should forward to.
func (p *ServiceProxy) desiredListeners() (map[listenAddr]servicePort, error) {
	services, err := p.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	desired := map[listenAddr]servicePort{}
	for _, svc := range services {
		for _, ip := range proxiedIPs(svc) {
			for _, sp := range svc.Spec.Ports {
				if protocolOrTCP(sp.Protocol) != corev1.ProtocolTCP {
					continue
				}
				desired[listenAddr{ip: ip, port: sp.Port}] = servicePort{namespace: svc.Namespace, service: svc.Name, port: sp.Name}
			}
		}
	}
	return desired, nil
}

// proxiedIPs returns the IPv4 ClusterIPs of svc, none for headless and ExternalName Services.
func proxiedIPs(svc *corev1.Service) []string {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []string
	for _, ip := range ips {
		if parsed := net.ParseIP(ip); parsed != nil && parsed.To4() != nil {
			out = append(out, parsed.String())
		}
	}
	return out
}

// closeUnwanted closes the listeners not in desired. Called with p.mu held.
func (p *ServiceProxy) closeUnwanted(desired map[listenAddr]servicePort) {
	for addr, pl := range p.listeners {
		if _, ok := desired[addr]; !ok {
			_ = pl.ln.Close()
			delete(p.listeners, addr)
			p.log.V(2).Info("Stopped listening", "address", addr.String())
		}
	}
}

// removeUnusedAddresses removes the assigned addresses no desired listener
// uses. Called with p.mu held.
func (p *ServiceProxy) removeUnusedAddresses(desired map[listenAddr]servicePort) []error {
	used := map[string]bool{}
	for addr := range desired {
		used[addr.ip] = true
	}
	var errs []error
	for ip := range p.assigned {
		if used[ip] {
			continue
		}
		if err := p.addrs.Remove(ip); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(p.assigned, ip)
	}
	return errs
}

// openWanted points existing listeners at their desired Service port and
// opens the missing ones, adding their addresses first. Called with p.mu held.
func (p *ServiceProxy) openWanted(desired map[listenAddr]servicePort) []error {
	var errs []error
	for addr, target := range desired {
		if pl, ok := p.listeners[addr]; ok {
			pl.target.Store(&target)
			continue
		}
		if err := p.assign(addr.ip); err != nil {
			errs = append(errs, err)
			continue
		}
		ln, err := net.Listen("tcp4", addr.String())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pl := &portListener{ln: ln}
		pl.target.Store(&target)
		p.listeners[addr] = pl
		p.log.V(2).Info("Listening", "address", addr.String(), "service", target.namespace+"/"+target.service, "port", target.port)
		p.wg.Add(1)
		go p.acceptLoop(pl)
	}
	return errs
}

// assign adds ip to the host unless it was added already. Called with p.mu held.
func (p *ServiceProxy) assign(ip string) error {
	if p.assigned[ip] {
		return nil
	}
	if err := p.addrs.Add(ip); err != nil {
		return err
	}
	p.assigned[ip] = true
	return nil
}

// acceptLoop accepts connections on pl until it is closed, each handled by its own goroutine.
func (p *ServiceProxy) acceptLoop(pl *portListener) {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := pl.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // e.g. out of file descriptors: back off, as net/http does
			p.log.Error(err, "Failed to accept connection", "address", pl.ln.Addr().String())
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		p.wg.Add(1)
		go p.forward(pl, c)
	}
}

// forward connects client to an endpoint of pl's Service port and copies
// bytes both ways until both sides are done. Without a reachable endpoint it
// closes client.
func (p *ServiceProxy) forward(pl *portListener, client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	backend := p.dialEndpoint(pl)
	if backend == nil {
		_ = client.Close()
		return
	}
	if !p.track(backend) {
		_ = client.Close()
		return
	}
	defer p.untrack(backend)
	splice(client, backend)
}

// dialEndpoint connects to a ready endpoint of pl's Service port, starting at
// the next one in round-robin order and trying each in turn on failure. It
// returns nil when none could be reached.
func (p *ServiceProxy) dialEndpoint(pl *portListener) net.Conn {
	target := pl.target.Load()
	addrs, err := p.endpointAddrs(*target)
	if err != nil || len(addrs) == 0 {
		p.log.V(2).Info("No endpoint to forward to", "service", target.namespace+"/"+target.service, "port", target.port, "err", err)
		return nil
	}
	start := int(pl.next.Add(1) - 1)
	dialer := net.Dialer{Timeout: dialTimeout}
	for i := range addrs {
		addr := addrs[(start+i)%len(addrs)]
		c, err := dialer.DialContext(p.stopCtx, "tcp", addr)
		if err == nil {
			return c
		}
		p.log.V(2).Info("Failed to dial endpoint", "endpoint", addr, "err", err)
	}
	return nil
}

// endpointAddrs returns the host:port of every ready endpoint of target, sorted.
func (p *ServiceProxy) endpointAddrs(target servicePort) ([]string, error) {
	eps, err := serviceEndpoints(p.slices, target.namespace, target.service, false)
	if err != nil {
		return nil, err
	}
	var addrs []string
	seen := map[string]bool{}
	for _, e := range eps {
		port, ok := e.port(target.port, corev1.ProtocolTCP)
		addr := net.JoinHostPort(e.ip, strconv.Itoa(int(port)))
		if ok && !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	slices.Sort(addrs) // a stable order for round robin
	return addrs, nil
}

// splice copies a to b and b to a until both directions are done, passing
// each end of stream on as a half-close, then closes both. An error in
// either direction closes both at once.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() { copyHalf(b, a) })
	copyHalf(a, b)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// copyHalf copies src to dst. At the end of src it closes dst for writing so
// that dst's peer sees the end too; on an error it closes both.
func copyHalf(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		_ = src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// track records an open connection so that shutdown can close it. After
// shutdown it closes c instead and returns false.
func (p *ServiceProxy) track(c net.Conn) bool {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.conns == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// untrack forgets a connection recorded by track.
func (p *ServiceProxy) untrack(c net.Conn) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	delete(p.conns, c)
}

// shutdown stops the proxy for good: it closes every listener and
// connection, waits for their goroutines and removes the addresses it added.
func (p *ServiceProxy) shutdown(log logr.Logger) {
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, pl := range p.listeners {
		_ = pl.ln.Close()
		delete(p.listeners, addr)
	}
	p.connMu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.connMu.Unlock()
	p.wg.Wait()
	for ip := range p.assigned {
		if err := p.addrs.Remove(ip); err != nil {
			log.Error(err, "Failed to remove service address", "address", ip)
			continue
		}
		delete(p.assigned, ip)
	}
}
