// Package podenv builds a container's environment and command line exactly as
// a kubelet does (envFrom, env with $(VAR) expansion and valueFrom, the
// downward API), for the local cluster's node agent, which runs each
// container as a host process. Service-link variables are not added.
//
// Everything here is a pure function of the pod and of what a Getter returns.
package podenv

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Getter reads what a container's environment refers to: the Secrets and
// ConfigMaps of the pod's namespace, and the allocatable resources of the
// pod's node. The agent passes a client-backed implementation. A missing
// Secret or ConfigMap is an error for which apierrors.IsNotFound is true (a
// nil object with a nil error counts as missing too).
type Getter interface {
	// Secret returns the Secret name of the pod's namespace.
	Secret(ctx context.Context, name string) (*corev1.Secret, error)
	// ConfigMap returns the ConfigMap name of the pod's namespace.
	ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error)
	// NodeAllocatable returns the allocatable resources of the pod's node,
	// the limits of a container that sets none (see ResourceFieldRef). It is
	// called only for a resourceFieldRef.
	NodeAllocatable(ctx context.Context) (corev1.ResourceList, error)
}

// Env returns the environment of container c of pod as "NAME=value" strings,
// built as the kubelet builds it:
//
//  1. envFrom, in order: every key of the ConfigMap's data or the Secret's
//     data, with the prefix, in sorted key order; a key that is not a valid
//     environment variable name once prefixed (empty, or with '=' or a
//     character that is not printable ASCII) is skipped;
//  2. env, in order: value with its $(VAR) references expanded (Expand)
//     against the variables defined before it, or valueFrom: fieldRef
//     (FieldRef), resourceFieldRef (ResourceFieldRef, for c unless it names
//     another container), secretKeyRef, configMapKeyRef.
//
// A later definition of a name replaces the value and keeps the place of the
// first one (the kubelet's order is that of a map). A Secret, ConfigMap or key
// that is missing is skipped when the reference is optional and is otherwise
// an error that names the variable (or the envFrom entry), the object and the
// key. Each object is read once.
func Env(ctx context.Context, pod *corev1.Pod, c *corev1.Container, get Getter) ([]string, error) {
	r := &resolver{ctx: ctx, pod: pod, get: get, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
	var env orderedEnv
	for i, from := range c.EnvFrom {
		data, err := r.envFrom(from)
		if err != nil {
			return nil, fmt.Errorf("envFrom[%d]: %w", i, err)
		}
		for _, key := range sortedKeys(data) {
			name := from.Prefix + key
			if len(validation.IsRelaxedEnvVarName(name)) != 0 {
				continue
			}
			env.set(name, data[key])
		}
	}
	for _, v := range c.Env {
		value, ok, err := r.value(c, v, env.values)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", v.Name, err)
		}
		if ok {
			env.set(v.Name, value)
		}
	}
	return env.list(), nil
}

// resolver reads the objects an environment refers to, each once.
type resolver struct {
	ctx         context.Context
	pod         *corev1.Pod
	get         Getter
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	allocatable corev1.ResourceList
	gotAlloc    bool
}

// envFrom returns the variables of one envFrom entry, unprefixed: nil when the
// entry is optional and its object is missing.
func (r *resolver) envFrom(from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := r.configMap(from.ConfigMapRef.Name)
		if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("configMap %s/%s: %w", r.pod.Namespace, from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := r.secret(from.SecretRef.Name)
		if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", r.pod.Namespace, from.SecretRef.Name, err)
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, nil
}

// value returns the value of env var v of container c, given the variables
// defined before it; ok is false when v is skipped (an optional reference
// to something missing).
func (r *resolver) value(c *corev1.Container, v corev1.EnvVar, defined map[string]string) (value string, ok bool, err error) {
	from := v.ValueFrom
	switch {
	case v.Value != "" || from == nil:
		return Expand(v.Value, defined), true, nil
	case from.FieldRef != nil:
		if av := from.FieldRef.APIVersion; av != "" && av != "v1" {
			return "", false, fmt.Errorf("fieldRef: unsupported pod version %q", av)
		}
		value, err = FieldRef(r.pod, from.FieldRef.FieldPath)
		return value, err == nil, err
	case from.ResourceFieldRef != nil:
		allocatable, err := r.nodeAllocatable()
		if err != nil {
			return "", false, err
		}
		value, err = ResourceFieldRef(r.pod, c.Name, from.ResourceFieldRef, allocatable)
		return value, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := r.configMap(ref.Name)
		if err == nil {
			value, ok = cm.Data[ref.Key]
		}
		return keyResult(value, ok, err, isTrue(ref.Optional), "ConfigMap", r.pod.Namespace, ref.Name, ref.Key)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := r.secret(ref.Name)
		var b []byte
		if err == nil {
			b, ok = s.Data[ref.Key]
		}
		return keyResult(string(b), ok, err, isTrue(ref.Optional), "Secret", r.pod.Namespace, ref.Name, ref.Key)
	}
	return "", false, errors.New("valueFrom has no source the local cluster supports")
}

// keyResult is the outcome of reading key of object kind namespace/name: the
// value when found (ok), nothing when the object or key is missing and the
// reference optional, an error naming object and key otherwise.
func keyResult(value string, found bool, err error, optional bool, kind, namespace, name, key string) (string, bool, error) {
	switch {
	case err == nil && found:
		return value, true, nil
	case optional && (err == nil || apierrors.IsNotFound(err)):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("key %q of %s %s/%s: %w", key, kind, namespace, name, err)
	}
	return "", false, fmt.Errorf("couldn't find key %q in %s %s/%s", key, kind, namespace, name)
}

// secret returns the Secret name, read once.
func (r *resolver) secret(name string) (*corev1.Secret, error) {
	if s, ok := r.secrets[name]; ok {
		return s, nil
	}
	s, err := r.get.Secret(r.ctx, name)
	if err == nil && s == nil {
		err = apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	if err != nil {
		return nil, err
	}
	r.secrets[name] = s
	return s, nil
}

// configMap returns the ConfigMap name, read once.
func (r *resolver) configMap(name string) (*corev1.ConfigMap, error) {
	if cm, ok := r.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := r.get.ConfigMap(r.ctx, name)
	if err == nil && cm == nil {
		err = apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	if err != nil {
		return nil, err
	}
	r.configMaps[name] = cm
	return cm, nil
}

// nodeAllocatable returns the node's allocatable resources, read once.
func (r *resolver) nodeAllocatable() (corev1.ResourceList, error) {
	if !r.gotAlloc {
		a, err := r.get.NodeAllocatable(r.ctx)
		if err != nil {
			return nil, fmt.Errorf("node allocatable: %w", err)
		}
		r.allocatable, r.gotAlloc = a, true
	}
	return r.allocatable, nil
}

// orderedEnv is an environment that keeps the order in which names were
// first defined.
type orderedEnv struct {
	names  []string
	values map[string]string
}

// set defines name, replacing its value if it is already defined.
func (e *orderedEnv) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// list returns the environment as "NAME=value" strings.
func (e *orderedEnv) list() []string {
	out := make([]string, len(e.names))
	for i, name := range e.names {
		out[i] = name + "=" + e.values[name]
	}
	return out
}

// sortedKeys returns the keys of m in sorted order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isTrue reports whether b is set and true.
func isTrue(b *bool) bool { return b != nil && *b }
