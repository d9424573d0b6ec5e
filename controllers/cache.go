package controllers

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// What the operator keeps in memory. A cluster may hold thousands of
// Secrets that are none of the operator's business, and a Secret's data
// is often large, so the manager's cache holds only the Secrets that carry
// the etcd.aenix.io/cluster label: every Secret the operator writes, and
// every Secret cert-manager issues for it (the Certificates' secretTemplate
// carries the label). The Secrets a user names in a cluster's spec
// (spec.security.tls) are not the operator's to label: they are read from
// the API server when the cache does not have them (WithLiveSecrets), and
// a second, metadata-only cache of Secret names (NewSecretNamesCache) wakes
// the PKI reconciler when one of them comes, changes or goes.

// CacheOptions are the manager's cache options: the namespaces to watch
// (nil for all) and, for Secrets, only those the operator labels.
func CacheOptions(namespaces map[string]cache.Config) cache.Options {
	return cache.Options{
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: ownedSecrets()},
		},
	}
}

// ownedSecrets selects the Secrets that carry etcd.aenix.io/cluster.
func ownedSecrets() labels.Selector {
	has, err := labels.NewRequirement(etcdv1alpha1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return labels.NewSelector().Add(*has)
}

// NewSecretNamesCache starts, with the manager, a cache of the names of the
// Secrets in namespaces (nil for all): metadata only, and of the metadata
// only what names a Secret. Its informer tells the PKI reconciler that a
// user's Secret changed, at the cost of a few hundred bytes per Secret
// instead of the whole Secret.
func NewSecretNamesCache(mgr ctrl.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: maps.Clone(namespaces),
		DefaultTransform:  keepName,
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// keepName strips an object's metadata down to what names it.
func keepName(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// secretMetadata is the metadata of a Secret, as NewSecretNamesCache holds it.
func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// WithLiveSecrets is reader, except that a Secret reader does not have is
// read from live, the API server: the manager's cache holds only the
// Secrets the operator labels (CacheOptions), not the ones users name in a
// cluster's spec. Without live it is reader.
func WithLiveSecrets(reader, live client.Reader) client.Reader {
	if live == nil {
		return reader
	}
	return liveSecrets{Reader: reader, live: live}
}

type liveSecrets struct {
	client.Reader
	live client.Reader
}

func (r liveSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, secret := obj.(*corev1.Secret); secret && apierrors.IsNotFound(err) {
		return r.live.Get(ctx, key, obj, opts...)
	}
	return err
}
