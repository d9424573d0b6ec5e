// Package netsvc provides the cluster network services of the local cluster,
// which has neither kube-proxy nor CoreDNS: a cluster DNS server (DNS) and a
// userspace ClusterIP proxy (ServiceProxy). Both read Services and
// EndpointSlices through client-go listers, so they always answer from the
// informer caches they are given and hold no state of their own about the
// API server's objects.
package netsvc

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// endpoint is one IPv4 address of a Service's EndpointSlices, with the
// hostname the EndpointSlice controller gave it and the ports its slice
// declares.
type endpoint struct {
	ip       string
	hostname string
	ports    []discoveryv1.EndpointPort
}

// serviceEndpoints returns the IPv4 endpoints of the Service namespace/name,
// sorted by address. Only ready endpoints are returned unless includeNotReady
// is set. An endpoint whose ready condition is unknown counts as ready, as the
// EndpointSlice API asks of consumers.
func serviceEndpoints(lister discoverylisters.EndpointSliceLister, namespace, name string, includeNotReady bool) ([]endpoint, error) {
	selector := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	endpointSlices, err := lister.EndpointSlices(namespace).List(selector)
	if err != nil {
		return nil, err
	}
	var eps []endpoint
	for _, s := range endpointSlices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 || (!includeNotReady && !isReady(e)) {
				continue
			}
			// Addresses are fungible; consumers may use the first one only.
			eps = append(eps, endpoint{ip: e.Addresses[0], hostname: deref(e.Hostname), ports: s.Ports})
		}
	}
	slices.SortFunc(eps, func(a, b endpoint) int {
		return cmp.Or(cmp.Compare(a.ip, b.ip), cmp.Compare(a.hostname, b.hostname))
	})
	return eps, nil
}

// isReady reports whether e may receive traffic; nil means unknown, read as ready.
func isReady(e discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// port returns the port number of e's slice port called name with the given
// protocol. An unnamed slice port matches the name "", an unset protocol TCP.
func (e endpoint) port(name string, protocol corev1.Protocol) (int32, bool) {
	for _, p := range e.ports {
		if deref(p.Name) == name && protocolOrTCP(deref(p.Protocol)) == protocolOrTCP(protocol) && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}

// protocolOrTCP applies the API default of TCP to an unset protocol.
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// deref returns the value p points to, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
