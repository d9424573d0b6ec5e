package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// memberIDs maps member names to IDs, from etcd.
func memberIDs(ctx context.Context, t *testing.T, cli *clientv3.Client) map[string]uint64 {
	t.Helper()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	for _, m := range resp.Members {
		ids[m.Name] = m.ID
	}
	return ids
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestMemberReplacement deletes one member's Pod. With an emptyDir its
// data is gone: the member is removed and a new one replaces it. With a
// claim its data survives: the same member comes back. Either way the
// cluster returns to full strength with its data.
func TestMemberReplacement(t *testing.T) {
	claim := &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}},
	}}
	tests := []struct {
		name        string
		storage     etcdv1alpha1.StorageSpec
		sameMember  bool
		deleteClaim bool
	}{
		{"emptydir", etcdv1alpha1.StorageSpec{}, false, false},
		{"claim", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim}, true, false},
		{"claim-lost", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(ctx, t)
			cluster := &etcdv1alpha1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tt.name},
				Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Storage: tt.storage},
			}
			if err := k8sClient.Create(ctx, cluster); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(cluster)
			awaitReady(ctx, t, key, 3)
			cli := etcdClient(ctx, t, ns, tt.name)
			if _, err := cli.Put(ctx, "/e2e/kept", "yes"); err != nil {
				t.Fatal(err)
			}
			before := memberIDs(ctx, t, cli)
			victim := tt.name + "-1"
			if tt.deleteClaim {
				claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + victim}}
				if err := k8sClient.Delete(ctx, claim); err != nil {
					t.Fatal(err)
				}
			}
			old := &corev1.Pod{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, old); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := k8sClient.Delete(ctx, old); err != nil {
				t.Fatal(err)
			}
			support.Eventually(t, 3*time.Minute, "the cluster to return to 3 healthy members", func() error {
				ids := memberIDs(ctx, t, cli)
				if len(ids) != 3 {
					return fmt.Errorf("members %v", ids)
				}
				_, victimBack := ids[victim]
				switch {
				case tt.sameMember && (!victimBack || ids[victim] != before[victim]):
					return fmt.Errorf("want %s back with ID %x, members %v", victim, before[victim], ids)
				case !tt.sameMember && victimBack:
					return fmt.Errorf("want %s replaced, members %v", victim, ids)
				}
				for name := range ids {
					if name == "" {
						return fmt.Errorf("a member has not started: %v", ids)
					}
					pod := &corev1.Pod{}
					if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
						return err
					}
					if pod.UID == old.UID || !podReady(pod) {
						return fmt.Errorf("the Pod of %s is the deleted one or not Ready yet", name)
					}
				}
				return nil
			})
			awaitReady(ctx, t, key, 3)
			t.Logf("full strength %s after deleting %s", time.Since(start).Round(time.Second), victim)
			resp, err := cli.Get(ctx, "/e2e/kept")
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the data written before is gone: %v %v", resp, err)
			}
		})
	}
}
