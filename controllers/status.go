package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// statusPatch is the part of an EtcdCluster's status one reconciler owns.
// Each reconciler applies its own with server-side apply under its own field
// manager, so `kubectl get -o yaml --show-managed-fields` tells who wrote
// each field and reconcilers never overwrite each other's conditions.
type statusPatch struct {
	conditions []metav1.Condition
	fields     map[string]any
}

// applyStatus server-side applies patch to the status of cluster as
// fieldManager. A condition keeps its lastTransitionTime while its status
// does not change.
func applyStatus(ctx context.Context, c client.Client, cluster *etcdv1alpha1.EtcdCluster, fieldManager string, patch statusPatch) error {
	status := map[string]any{}
	for k, v := range patch.fields {
		status[k] = v
	}
	if len(patch.conditions) > 0 {
		conds := make([]any, 0, len(patch.conditions))
		for _, want := range patch.conditions {
			merged := append([]metav1.Condition(nil), cluster.Status.Conditions...)
			meta.SetStatusCondition(&merged, want)
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta.FindStatusCondition(merged, want.Type))
			if err != nil {
				return fmt.Errorf("converting condition %s: %w", want.Type, err)
			}
			conds = append(conds, u)
		}
		status["conditions"] = conds
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
	u.SetName(cluster.Name)
	u.SetNamespace(cluster.Namespace)
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
}

// foreignObjectError is an object the operator would apply that exists
// already and is not controlled by the owner the operator builds it for:
// someone else's, or another cluster's. It is never taken over.
type foreignObjectError struct {
	kind, name, owner string
}

func (e *foreignObjectError) Error() string {
	return fmt.Sprintf("%s %s exists and does not belong to %s: the operator does not take over an object it did not create. Delete or rename it, or rename this resource", e.kind, e.name, e.owner)
}

// foreign tells whether existing is controlled by another owner than the
// one want names (a built object names its controller in its owner
// references); nil when it is the same.
func foreign(kind string, want, existing client.Object) error {
	ref := metav1.GetControllerOf(want)
	if ref == nil {
		return nil
	}
	if got := metav1.GetControllerOf(existing); got == nil || got.UID != ref.UID {
		return &foreignObjectError{kind: kind, name: want.GetName(), owner: ref.Kind + " " + ref.Name}
	}
	return nil
}

// applyObject server-side applies the metadata and spec of obj as
// fieldManager, unless an object of its name exists that its controller
// does not control (foreignObjectError). The API server's refusal of the
// object is a refusalError, for the cluster's conditions and events.
func applyObject(ctx context.Context, c client.Client, obj client.Object, fieldManager string) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	existing, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%s %s is not an object", gvk.Kind, obj.GetName())
	}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); {
	case err == nil:
		if err := foreign(gvk.Kind, obj, existing); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	uo := &unstructured.Unstructured{Object: u}
	uo.SetGroupVersionKind(gvk)
	return refused(gvk.Kind, obj.GetName(), c.Apply(ctx, client.ApplyConfigurationFromUnstructured(uo), client.FieldOwner(fieldManager), client.ForceOwnership))
}
