package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// seedPrerequisites are the cluster objects the seed's full example names:
// the gp3 StorageClass (served by the local cluster's provisioner), the
// low PriorityClass and the legacy RuntimeClass.
func seedPrerequisites() []client.Object {
	return []client.Object{
		&storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: "gp3"},
			Provisioner:          "localcluster.etcd-operator.dev/local",
			VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr.To(true),
		},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 100},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Handler: "legacy"},
	}
}

// TestExamplesComeUpReady applies every example that needs no TLS
// Secrets, each in its own namespace, and waits for it to be Ready with etcd's member
// list matching spec.replicas.
func TestExamplesComeUpReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, obj := range seedPrerequisites() {
		if err := k8sClient.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join(env.Root, "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.Contains(file, "tls") {
			continue // needs the user's certificates
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			support.Parallel(t, support.Short)
			ns := newNamespace(ctx, t)
			for _, obj := range support.ReadObjects(t, file) {
				obj.SetNamespace(ns)
				if err := k8sClient.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
				replicas := replicasOf(obj.Object)
				key := client.ObjectKey{Namespace: ns, Name: obj.GetName()}
				took := awaitReady(ctx, t, key, replicas)
				assertMembers(ctx, t, etcdClient(ctx, t, ns, obj.GetName()), ns, int(replicas))
				t.Logf("%s: %d members Ready in %s", obj.GetName(), replicas, took.Round(time.Second))
				if err := k8sClient.Delete(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// replicasOf is spec.replicas of an example as read from YAML, or the
// default.
func replicasOf(obj map[string]any) int32 {
	spec, _ := obj["spec"].(map[string]any)
	switch n := spec["replicas"].(type) {
	case int64:
		return int32(n)
	case float64:
		return int32(n)
	}
	return etcdv1alpha1.DefaultReplicas
}
