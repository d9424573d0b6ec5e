package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// skipUnchangedApplies is a client whose server-side applies (of objects
// and of status) are not sent when they would change nothing: the same
// field manager sent the same configuration last time, and the object in
// the cache still holds every field of it. Every pass of every reconciler
// applies its children and its part of the status; a cluster that waits
// (members starting, Pods that cannot be scheduled) would otherwise cost
// four writes to the API server every few seconds (measured with the
// bench's fleet of clusters whose members never start).
//
// Both conditions are needed: the cache holding the fields says nobody
// changed them since; the configuration being the last one sent says no
// field the manager stopped setting is waiting to be removed (server-side
// apply removes the fields a manager owned and no longer sends).
type skipUnchangedApplies struct {
	client.Client
	sent *sentApplies
}

// sentApplies is the digest of the configuration last applied, per object
// and field manager.
type sentApplies struct {
	mu     sync.Mutex
	digest map[sentKey][sha256.Size]byte
}

type sentKey struct {
	gvk                          schema.GroupVersionKind
	namespace, name, subresource string
	manager                      string
}

func newSkipUnchangedApplies(c client.Client) client.Client {
	return skipUnchangedApplies{Client: c, sent: &sentApplies{digest: map[sentKey][sha256.Size]byte{}}}
}

func (c skipUnchangedApplies) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	o := &client.ApplyOptions{}
	o.ApplyOptions(opts)
	return c.apply(ctx, obj, "", o.FieldManager, func() error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c skipUnchangedApplies) Status() client.SubResourceWriter {
	return statusApplies{SubResourceWriter: c.Client.Status(), c: c}
}

type statusApplies struct {
	client.SubResourceWriter
	c skipUnchangedApplies
}

func (s statusApplies) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	o := &client.SubResourceApplyOptions{}
	o.ApplyOpts(opts)
	return s.c.apply(ctx, obj, "status", o.FieldManager, func() error { return s.SubResourceWriter.Apply(ctx, obj, opts...) })
}

// apply sends the configuration with send unless it would change nothing.
func (c skipUnchangedApplies) apply(ctx context.Context, obj runtime.ApplyConfiguration, subresource, manager string, send func() error) error {
	want, key, err := c.decode(obj, subresource, manager)
	if err != nil {
		return send() // not one this client can judge
	}
	raw, _ := json.Marshal(want)
	digest := sha256.Sum256(raw)
	c.sent.mu.Lock()
	last, ok := c.sent.digest[key]
	c.sent.mu.Unlock()
	if ok && last == digest && c.holds(ctx, key, want) {
		return nil
	}
	if err := send(); err != nil {
		return err
	}
	c.sent.mu.Lock()
	c.sent.digest[key] = digest
	c.sent.mu.Unlock()
	return nil
}

// decode reads an apply configuration as JSON values.
func (c skipUnchangedApplies) decode(obj runtime.ApplyConfiguration, subresource, manager string) (map[string]any, sentKey, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, sentKey{}, err
	}
	var want map[string]any
	if err := json.Unmarshal(raw, &want); err != nil {
		return nil, sentKey{}, err
	}
	apiVersion, _ := want["apiVersion"].(string)
	kind, _ := want["kind"].(string)
	md, _ := want["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	namespace, _ := md["namespace"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || name == "" || manager == "" {
		return nil, sentKey{}, fmt.Errorf("apply configuration without kind, name or field manager")
	}
	return want, sentKey{gvk: gv.WithKind(kind), namespace: namespace, name: name, subresource: subresource, manager: manager}, nil
}

// holds says whether the cached object of key has every field of want.
func (c skipUnchangedApplies) holds(ctx context.Context, key sentKey, want map[string]any) bool {
	typed, err := c.Scheme().New(key.gvk)
	if err != nil {
		return false
	}
	live, ok := typed.(client.Object)
	if !ok || c.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, live) != nil {
		return false
	}
	raw, err := json.Marshal(live)
	if err != nil {
		return false
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		return false
	}
	// A typed object read back carries no apiVersion and kind: the Get by
	// key.gvk checked them.
	fields := maps.Clone(want)
	delete(fields, "apiVersion")
	delete(fields, "kind")
	return contains(got, fields)
}

// contains says whether got has every field of want with the same value:
// maps field by field, lists element by element (a list of objects with a
// "type", such as conditions, by type), other values equal.
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !contains(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		if byType, ok := typed(w); ok {
			gotByType, ok := typed(g)
			if !ok {
				return false
			}
			for t, wv := range byType {
				if !contains(gotByType[t], wv) {
					return false
				}
			}
			return true
		}
		if len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(got, want)
	}
}

// typed indexes a list of objects by their "type"; false when an element
// is not an object with a string type.
func typed(list []any) (map[string]any, bool) {
	out := map[string]any{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		t, ok := m["type"].(string)
		if !ok {
			return nil, false
		}
		out[t] = m
	}
	return out, len(out) > 0
}
