package netsvc

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// ttl is the time to live, in seconds, of every record DNS answers with.
// It is short because Services and endpoints come and go at any time.
const ttl = 5

// DNS answers cluster DNS queries from the API server's Services, EndpointSlices and Pods.
//
// It serves the records kube-dns and CoreDNS serve, for IPv4 only:
//
//	<svc>.<ns>.svc.<domain>                 A: the ClusterIP, or for a headless Service the
//	                                           addresses of its ready endpoints (all endpoints
//	                                           with publishNotReadyAddresses); CNAME for ExternalName
//	<endpoint>.<svc>.<ns>.svc.<domain>      A: the endpoint whose hostname is <endpoint>, or which
//	                                           has no hostname and whose dashed address is <endpoint>
//	_<port>._<proto>.<svc>.<ns>.svc.<domain> SRV: one record per endpoint (headless) or for the
//	                                           Service name (ClusterIP), the A records as extras
//	<a-b-c-d>.<ns>.pod.<domain>              A: a.b.c.d, unchecked, as CoreDNS's "pods insecure"
//
// It is authoritative for domain, answers NXDOMAIN for unknown names and names
// outside domain, and never forwards a query anywhere. AAAA and other types
// for a known name get an empty NOERROR answer.
type DNS struct {
	zone     string // domain as a lower-case FQDN, e.g. "cluster.local."
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

// NewDNS returns a DNS serving domain (e.g. "cluster.local") from the given listers.
func NewDNS(domain string, services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister) *DNS {
	return &DNS{
		zone:     dns.Fqdn(strings.ToLower(strings.Trim(domain, "."))),
		services: services,
		slices:   slices,
	}
}

// Serve serves DNS over UDP and TCP on addr (host:port) until ctx is done and
// both listeners have stopped. Both use the same port; with port 0 the TCP
// listener picks it. It returns nil after ctx is done, or the error that
// stopped either listener (having stopped the other).
func (d *DNS) Serve(ctx context.Context, addr string) error {
	pc, l, err := listenUDPAndTCP(addr)
	if err != nil {
		return err
	}
	return d.ServeConns(ctx, pc, l)
}

// ServeConns is Serve on listeners the caller opened, for a caller that binds
// before it drops privileges or needs to know the chosen port. It closes both.
func (d *DNS) ServeConns(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() { _ = pc.Close() }()
	defer func() { _ = l.Close() }()

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, srv := range []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: l, Handler: d}} {
		wg.Go(func() {
			errs[i] = runServer(ctx, srv)
			cancel() // one listener stopped: stop the other one too
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runServer runs srv until ctx is done, then shuts it down and waits for its
// in-flight queries. It returns srv's error if srv stops on its own.
func runServer(ctx context.Context, srv *dns.Server) error {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()

	// Shutdown before the server has started fails and leaves it running.
	select {
	case err := <-done:
		return err
	case <-started:
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = srv.Shutdown()
		return <-done
	}
}

// listenUDPAndTCP opens a TCP listener on addr and a UDP socket on the same
// port. With port 0 it retries a few times should the UDP port be taken.
func listenUDPAndTCP(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 1; ; attempt++ {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		udpAddr := net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		pc, err := net.ListenPacket("udp", udpAddr)
		if err == nil {
			return pc, l, nil
		}
		_ = l.Close()
		if port != "0" || attempt == 3 {
			return nil, nil, err
		}
	}
}

// ServeDNS answers the query r, implementing dns.Handler.
func (d *DNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := d.reply(r)
	size := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
		m.SetEdns0(uint16(size), false)
	}
	if w.LocalAddr().Network() == "udp" {
		m.Truncate(size) // sets TC, so that the client retries over TCP
	}
	_ = w.WriteMsg(m)
}

// reply builds the response to r.
func (d *DNS) reply(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	switch {
	case r.Opcode != dns.OpcodeQuery:
		return m.SetRcode(r, dns.RcodeNotImplemented)
	case len(r.Question) != 1:
		return m.SetRcode(r, dns.RcodeFormatError)
	}
	m.SetReply(r)
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(d.zone, name) {
		m.Rcode = dns.RcodeNameError
		return m
	}
	m.Authoritative = true
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m
	}
	res, err := d.resolve(q.Name, d.labels(name))
	switch {
	case err != nil:
		m.Rcode = dns.RcodeServerFailure
	case !res.exists:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{d.soa()}
	default:
		m.Answer = res.answer(q.Qtype)
		if len(m.Answer) > 0 && q.Qtype == dns.TypeSRV {
			m.Extra = res.extra
		}
		if len(m.Answer) == 0 {
			m.Ns = []dns.RR{d.soa()}
		}
	}
	return m
}

// labels returns the labels of the lower-case FQDN name left of the zone,
// nearest the zone first: "a.web.default.svc.cluster.local." gives
// [svc default web a].
func (d *DNS) labels(name string) []string {
	prefix := strings.TrimSuffix(strings.TrimSuffix(name, d.zone), ".")
	if prefix == "" {
		return nil
	}
	ls := strings.Split(prefix, ".")
	for i, j := 0, len(ls)-1; i < j; i, j = i+1, j-1 {
		ls[i], ls[j] = ls[j], ls[i]
	}
	return ls
}

// result is what a name resolves to: whether it exists, its records of all
// types, and the A records of SRV targets.
type result struct {
	exists  bool
	records []dns.RR
	extra   []dns.RR
}

// answer returns the records of r that answer a query of type qtype. A CNAME
// answers every type.
func (r result) answer(qtype uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range r.records {
		t := rr.Header().Rrtype
		if t == qtype || t == dns.TypeCNAME || qtype == dns.TypeANY {
			out = append(out, rr)
		}
	}
	return out
}

// resolve finds the records of qname, whose labels inside the zone are ls
// (nearest the zone first).
func (d *DNS) resolve(qname string, ls []string) (result, error) {
	switch {
	case len(ls) == 0:
		return result{exists: true, records: []dns.RR{d.soa()}}, nil
	case len(ls) == 1 && (ls[0] == "svc" || ls[0] == "pod"):
		return result{exists: true}, nil
	case ls[0] == "pod":
		return d.resolvePod(qname, ls[1:])
	case ls[0] == "svc":
		return d.resolveService(qname, ls[1:])
	}
	return result{}, nil
}

// resolvePod resolves <a-b-c-d>.<ns>.pod names; ls is [ns] or [ns a-b-c-d].
func (d *DNS) resolvePod(qname string, ls []string) (result, error) {
	switch len(ls) {
	case 1:
		return result{exists: true}, nil
	case 2:
		ip := parseDashedIPv4(ls[1])
		if ip == nil {
			return result{}, nil
		}
		return result{exists: true, records: []dns.RR{aRecord(qname, ip)}}, nil
	}
	return result{}, nil
}

// resolveService resolves names under svc; ls is [ns], [ns svc],
// [ns svc endpoint] or [ns svc _proto _port].
func (d *DNS) resolveService(qname string, ls []string) (result, error) {
	if len(ls) == 1 {
		services, err := d.services.Services(ls[0]).List(labels.Everything())
		return result{exists: len(services) > 0}, err
	}
	if len(ls) > 4 {
		return result{}, nil
	}
	svc, err := d.services.Services(ls[0]).Get(ls[1])
	if apierrors.IsNotFound(err) {
		return result{}, nil
	}
	if err != nil {
		return result{}, err
	}
	switch len(ls) {
	case 2:
		return d.serviceRecords(qname, svc, "", "")
	case 3:
		return d.endpointRecords(qname, svc, ls[2])
	}
	proto, port, ok := srvLabels(ls[2], ls[3])
	if !ok {
		return result{}, nil
	}
	return d.serviceRecords(qname, svc, proto, port)
}

// srvLabels returns the protocol and port name of the labels _proto and
// _port, which must both begin with an underscore.
func srvLabels(proto, port string) (string, string, bool) {
	p, ok1 := strings.CutPrefix(proto, "_")
	n, ok2 := strings.CutPrefix(port, "_")
	return p, n, ok1 && ok2 && p != "" && n != ""
}

// serviceRecords returns the A and SRV records of the Service name, or with
// proto and port set, the SRV records of its port of that name and protocol
// only; a Service without such a port has no such name.
func (d *DNS) serviceRecords(qname string, svc *corev1.Service, proto, port string) (result, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if port != "" {
			return result{}, nil
		}
		cname := &dns.CNAME{Hdr: header(qname, dns.TypeCNAME), Target: dns.Fqdn(svc.Spec.ExternalName)}
		return result{exists: true, records: []dns.RR{cname}}, nil
	}
	ports := matchingPorts(svc.Spec.Ports, proto, port)
	if port != "" && len(ports) == 0 {
		return result{}, nil
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return d.headlessRecords(qname, svc, ports, port == "")
	}
	res := result{exists: true}
	ip := net.ParseIP(svc.Spec.ClusterIP).To4()
	if ip == nil {
		return res, nil // not allocated yet, or IPv6
	}
	if port == "" {
		res.records = append(res.records, aRecord(qname, ip))
	}
	target := d.serviceName(svc)
	for _, p := range ports {
		res.records = append(res.records, srvRecord(qname, target, uint16(p.Port)))
	}
	setSRVWeights(res.records)
	if len(ports) > 0 {
		res.extra = []dns.RR{aRecord(target, ip)}
	}
	return res, nil
}

// headlessRecords returns the records of a headless Service: an A record per
// endpoint address (if withA) and an SRV record per endpoint and port.
func (d *DNS) headlessRecords(qname string, svc *corev1.Service, ports []corev1.ServicePort, withA bool) (result, error) {
	eps, err := serviceEndpoints(d.slices, svc.Namespace, svc.Name, svc.Spec.PublishNotReadyAddresses)
	if err != nil {
		return result{}, err
	}
	res := result{exists: true}
	seen := map[string]bool{}
	for _, e := range eps {
		ip := net.ParseIP(e.ip).To4()
		if ip == nil || seen[e.ip] {
			continue
		}
		seen[e.ip] = true
		if withA {
			res.records = append(res.records, aRecord(qname, ip))
		}
		target := endpointName(e) + "." + d.serviceName(svc)
		var srvs []dns.RR
		for _, p := range ports {
			if n, ok := e.port(p.Name, p.Protocol); ok {
				srvs = append(srvs, srvRecord(qname, target, uint16(n)))
			}
		}
		if len(srvs) > 0 {
			res.records = append(res.records, srvs...)
			res.extra = append(res.extra, aRecord(target, ip))
		}
	}
	setSRVWeights(res.records)
	return res, nil
}

// endpointRecords returns the A record of the endpoint of svc called name.
func (d *DNS) endpointRecords(qname string, svc *corev1.Service, name string) (result, error) {
	eps, err := serviceEndpoints(d.slices, svc.Namespace, svc.Name, svc.Spec.PublishNotReadyAddresses)
	if err != nil {
		return result{}, err
	}
	res := result{}
	for _, e := range eps {
		ip := net.ParseIP(e.ip).To4()
		if ip == nil || strings.ToLower(endpointName(e)) != name {
			continue
		}
		res.exists = true
		res.records = append(res.records, aRecord(qname, ip))
	}
	return res, nil
}

// matchingPorts returns the ports of ports with the given lower-case name
// and protocol; empty name and proto match every port.
func matchingPorts(ports []corev1.ServicePort, proto, name string) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, p := range ports {
		if name != "" && (strings.ToLower(p.Name) != name || strings.ToLower(string(protocolOrTCP(p.Protocol))) != proto) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// serviceName returns the FQDN <svc>.<ns>.svc.<zone> of svc.
func (d *DNS) serviceName(svc *corev1.Service) string {
	return svc.Name + "." + svc.Namespace + ".svc." + d.zone
}

// endpointName returns the label an endpoint is known by under its Service:
// its hostname, or its address with dashes for dots, as CoreDNS does.
func endpointName(e endpoint) string {
	if e.hostname != "" {
		return e.hostname
	}
	return strings.ReplaceAll(e.ip, ".", "-")
}

// parseDashedIPv4 parses "10-1-2-3" as 10.1.2.3, or returns nil.
func parseDashedIPv4(s string) net.IP {
	if strings.Count(s, "-") != 3 {
		return nil
	}
	return net.ParseIP(strings.ReplaceAll(s, "-", ".")).To4()
}

// soa returns the zone's SOA record, which negative answers carry so that
// resolvers cache them for no longer than the TTL.
func (d *DNS) soa() dns.RR {
	return &dns.SOA{
		Hdr:     header(d.zone, dns.TypeSOA),
		Ns:      "ns.dns." + d.zone,
		Mbox:    "hostmaster." + d.zone,
		Serial:  1,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

// header returns a record header for name and type t with the cluster TTL.
func header(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// aRecord returns an A record for name.
func aRecord(name string, ip net.IP) dns.RR {
	return &dns.A{Hdr: header(name, dns.TypeA), A: ip}
}

// srvRecord returns an SRV record for name pointing at target:port; its
// weight is set by setSRVWeights.
func srvRecord(name, target string, port uint16) dns.RR {
	return &dns.SRV{Hdr: header(name, dns.TypeSRV), Target: target, Port: port}
}

// setSRVWeights gives the SRV records among rrs equal weights summing to
// about 100, as CoreDNS does.
func setSRVWeights(rrs []dns.RR) {
	n := 0
	for _, rr := range rrs {
		if _, ok := rr.(*dns.SRV); ok {
			n++
		}
	}
	for _, rr := range rrs {
		if srv, ok := rr.(*dns.SRV); ok {
			srv.Weight = uint16(100 / n)
		}
	}
}
