package controllers

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// What the operator keeps in memory. A cluster may hold thousands of
// Secrets, Pods, claims, Services and PodDisruptionBudgets that are none
// of the operator's business, and a Secret's data is often large, so the manager's cache
// holds only the objects of those kinds that carry the
// etcd.aenix.io/cluster label: every one the operator writes (and every
// Secret cert-manager issues for it: the Certificates' secretTemplate
// carries the label). The objects it reads by name that are not its own
// (the Secrets a user names in spec.security.tls, a user's Service or Pod
// that holds a name the operator needs) are read from the API server when
// the cache does not have them (NewClient), and a second, metadata-only
// cache of Secret names (NewSecretNamesCache) wakes the PKI reconciler
// when one of those Secrets comes, changes or goes.

// CacheOptions are the manager's cache options: the namespaces to watch
// (nil for all) and, for the kinds of labelledOnly, only the objects the
// operator labels.
func CacheOptions(namespaces map[string]cache.Config) cache.Options {
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		if !labelledOnly(obj) {
			panic("CacheOptions and labelledOnly disagree") // a programming error
		}
		byObject[obj] = cache.ByObject{Label: clusterLabelled()}
	}
	return cache.Options{DefaultNamespaces: namespaces, ByObject: byObject}
}

// labelledOnly tells whether the cache holds objects of obj's kind only
// when they carry etcd.aenix.io/cluster.
func labelledOnly(obj client.Object) bool {
	switch obj.(type) {
	case *corev1.Secret, *corev1.Pod, *corev1.PersistentVolumeClaim, *corev1.Service, *policyv1.PodDisruptionBudget:
		return true
	}
	return false
}

// clusterLabelled selects the objects that carry etcd.aenix.io/cluster.
func clusterLabelled() labels.Selector {
	has, err := labels.NewRequirement(etcdv1alpha1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return labels.NewSelector().Add(*has)
}

// NewClient is the manager's client (ctrl.Options.NewClient): it reads
// from the manager's cache, and an object of a labelledOnly kind that the
// cache does not have from the API server; it does not send server-side
// applies that would change nothing (skipUnchangedApplies).
func NewClient(config *rest.Config, options client.Options) (client.Client, error) {
	cached, err := client.New(config, options)
	if err != nil {
		return nil, err
	}
	options.Cache = nil
	live, err := client.New(config, options)
	if err != nil {
		return nil, err
	}
	return newSkipUnchangedApplies(liveFallback{Client: cached, live: live}), nil
}

// liveFallback is a client whose Get of a labelledOnly kind the cache
// does not have reads live.
type liveFallback struct {
	client.Client
	live client.Reader
}

func (c liveFallback) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) && labelledOnly(obj) {
		return c.live.Get(ctx, key, obj, opts...)
	}
	return err
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
