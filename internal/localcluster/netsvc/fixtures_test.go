package netsvc

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// serviceWrapper builds a Service fixture.
type serviceWrapper struct{ corev1.Service }

// makeService starts a ClusterIP Service fixture without ports or IP.
func makeService(namespace, name string) *serviceWrapper {
	return &serviceWrapper{corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP},
	}}
}

// clusterIP sets the ClusterIP; corev1.ClusterIPNone makes the Service headless.
func (w *serviceWrapper) clusterIP(ip string) *serviceWrapper {
	w.Spec.ClusterIP = ip
	w.Spec.ClusterIPs = []string{ip}
	return w
}

// externalName makes the Service an ExternalName Service for host.
func (w *serviceWrapper) externalName(host string) *serviceWrapper {
	w.Spec.Type = corev1.ServiceTypeExternalName
	w.Spec.ExternalName = host
	return w
}

// port adds a port with the given name, protocol and number.
func (w *serviceWrapper) port(name string, protocol corev1.Protocol, port int32) *serviceWrapper {
	w.Spec.Ports = append(w.Spec.Ports, corev1.ServicePort{Name: name, Protocol: protocol, Port: port})
	return w
}

// publishNotReady sets publishNotReadyAddresses.
func (w *serviceWrapper) publishNotReady() *serviceWrapper {
	w.Spec.PublishNotReadyAddresses = true
	return w
}

// obj returns the Service.
func (w *serviceWrapper) obj() *corev1.Service { return &w.Service }

// sliceWrapper builds an EndpointSlice fixture.
type sliceWrapper struct{ discoveryv1.EndpointSlice }

// makeSlice starts an IPv4 EndpointSlice fixture of the Service service.
func makeSlice(namespace, name, service string) *sliceWrapper {
	return &sliceWrapper{discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}}
}

// port adds a TCP port with the given name and number.
func (w *sliceWrapper) port(name string, port int32) *sliceWrapper {
	w.Ports = append(w.Ports, discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)})
	return w
}

// endpoint adds an endpoint at ip with the given hostname ("" for none) and readiness.
func (w *sliceWrapper) endpoint(ip, hostname string, ready bool) *sliceWrapper {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	w.Endpoints = append(w.Endpoints, e)
	return w
}

// obj returns the EndpointSlice.
func (w *sliceWrapper) obj() *discoveryv1.EndpointSlice { return &w.EndpointSlice }

// indexerListers holds listers over plain indexers, which tests change directly.
type indexerListers struct {
	services, slices cache.Indexer
}

// newIndexerListers returns indexers holding objs (Services and EndpointSlices).
func newIndexerListers(t *testing.T, objs ...runtime.Object) *indexerListers {
	t.Helper()
	l := &indexerListers{services: newIndexer(), slices: newIndexer()}
	for _, o := range objs {
		l.add(t, o)
	}
	return l
}

// newIndexer returns an indexer keyed and indexed by namespace as informers' are.
func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// indexer returns the indexer for o's kind.
func (l *indexerListers) indexer(t *testing.T, o runtime.Object) cache.Indexer {
	t.Helper()
	switch o.(type) {
	case *corev1.Service:
		return l.services
	case *discoveryv1.EndpointSlice:
		return l.slices
	}
	t.Fatalf("unexpected fixture type %T", o)
	return nil
}

// add adds or replaces o.
func (l *indexerListers) add(t *testing.T, o runtime.Object) {
	t.Helper()
	if err := l.indexer(t, o).Add(o); err != nil {
		t.Fatal(err)
	}
}

// remove deletes o.
func (l *indexerListers) remove(t *testing.T, o runtime.Object) {
	t.Helper()
	if err := l.indexer(t, o).Delete(o); err != nil {
		t.Fatal(err)
	}
}

// serviceLister returns a Service lister over the indexer.
func (l *indexerListers) serviceLister() corelisters.ServiceLister {
	return corelisters.NewServiceLister(l.services)
}

// sliceLister returns an EndpointSlice lister over the indexer.
func (l *indexerListers) sliceLister() discoverylisters.EndpointSliceLister {
	return discoverylisters.NewEndpointSliceLister(l.slices)
}

// eventually polls cond every 20ms until it returns nil, failing the test
// with cond's last error and what was awaited after 10 seconds.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
