package controllers

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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
	if err := managerClient.Get(ctx, client.ObjectKeyFromObject(unrelated), got); err != nil || len(got.Data["blob"]) != 10<<10 {
		t.Errorf("reading the unrelated Secret through the API server: %v, %d bytes", err, len(got.Data["blob"]))
	}
}

// TestUnrelatedObjectsAreNotCached: Pods, claims, Services and
// PodDisruptionBudgets that carry no etcd.aenix.io/cluster label are not
// in the manager's cache, and the operator reads each all the same when
// it asks for it by name (a user's object holding a name it needs).
func TestUnrelatedObjectsAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	objs := []client.Object{
		&corev1.Pod{ObjectMeta: meta("pod"), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta("claim"), Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		}},
		&corev1.Service{ObjectMeta: meta("service"), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta("pdb"), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
	}
	owned := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned", Labels: map[string]string{etcdv1alpha1.LabelCluster: "c"}}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, obj := range append(objs, owned) {
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the labelled Service in the manager's cache", func() error {
		return managerCache.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.Service{})
	})
	for _, obj := range objs {
		kind := fmt.Sprintf("%T", obj)
		empty := obj.DeepCopyObject().(client.Object)
		if err := managerCache.Get(ctx, client.ObjectKeyFromObject(obj), empty); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s from the manager's cache: %v, want NotFound", kind, obj.GetName(), err)
		}
		got := obj.DeepCopyObject().(client.Object)
		if err := managerClient.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil || got.GetUID() == "" {
			t.Errorf("%s %s through the manager's client: %v", kind, obj.GetName(), err)
		}
	}
}
