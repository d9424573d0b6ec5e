package controllers

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// TestUnrelatedSecretsAreNotCached creates a Secret of 10 KiB that is none
// of the operator's business, then one the operator labels: once the
// manager's cache holds the second, it has seen the first too, and must
// not hold it. A user's Secret named in a cluster's spec is not labelled
// either; TestUserSecretsAreValidated shows the operator still reads it
// and wakes up when it changes.
func TestUnrelatedSecretsAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"},
		Data: map[string][]byte{"blob": bytes.Repeat([]byte{'x'}, 10<<10)}}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned", Labels: map[string]string{etcdv1alpha1.LabelCluster: "c"}}}
	for _, s := range []*corev1.Secret{unrelated, owned} {
		if err := k8sClient.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the labelled Secret in the manager's cache", func() error {
		return managerCache.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.Secret{})
	})
	if err := managerCache.Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("reading the unrelated Secret from the manager's cache: %v, want NotFound", err)
	}
	list := &corev1.SecretList{}
	if err := managerCache.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	if len(names) != 1 || names[0] != owned.Name {
		t.Errorf("the manager's cache lists Secrets %v in %s, want only %s", names, ns, owned.Name)
	}
	// The operator reads it all the same when it asks for it by name.
	got := &corev1.Secret{}
	if err := WithLiveSecrets(managerCache, k8sClient).Get(ctx, client.ObjectKeyFromObject(unrelated), got); err != nil || len(got.Data["blob"]) != 10<<10 {
		t.Errorf("reading the unrelated Secret through the API server: %v, %d bytes", err, len(got.Data["blob"]))
	}
}
