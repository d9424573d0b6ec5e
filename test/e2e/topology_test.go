package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// newNamespace creates a namespace for one test.
func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

// awaitReady waits until the cluster reports Ready with replicas members
// and returns how long it took.
func awaitReady(ctx context.Context, t *testing.T, key client.ObjectKey, replicas int32) time.Duration {
	t.Helper()
	start := time.Now()
	support.Eventually(t, 3*time.Minute, fmt.Sprintf("%s to be Ready with %d members", key.Name, replicas), func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || c.Status.Replicas != replicas || ready.ObservedGeneration != c.Generation {
			return fmt.Errorf("replicas %d, conditions %v", c.Status.Replicas, c.Status.Conditions)
		}
		return nil
	})
	return time.Since(start)
}

// etcdClient connects to the cluster through its client Service's
// ClusterIP, which the local cluster makes reachable from the host.
func etcdClient(ctx context.Context, t *testing.T, ns, name string) *clientv3.Client {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + net.JoinHostPort(svc.Spec.ClusterIP, "2379")},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// assertMembers checks etcd's own member list: n started voters, named
// after Pods that exist.
func assertMembers(ctx context.Context, t *testing.T, cli *clientv3.Client, ns string, n int) {
	t.Helper()
	support.Eventually(t, time.Minute, fmt.Sprintf("etcd to list %d started voters", n), func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.MemberList(cctx)
		if err != nil {
			return err
		}
		if len(resp.Members) != n {
			return fmt.Errorf("%d members", len(resp.Members))
		}
		for _, m := range resp.Members {
			if m.IsLearner || m.Name == "" {
				return fmt.Errorf("member %x is a learner or not started", m.ID)
			}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name}, &corev1.Pod{}); err != nil {
				return fmt.Errorf("member %s has no Pod: %w", m.Name, err)
			}
		}
		return nil
	})
}

// writer writes numbered keys through the client Service until stopped,
// remembering which writes etcd acknowledged and the longest run of
// failures.
type writer struct {
	cli     *clientv3.Client
	mu      sync.Mutex
	acked   []string
	errs    int
	longest time.Duration
}

func (w *writer) run(ctx context.Context) {
	var failingSince time.Time
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("/e2e/write/%06d", i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.cli.Put(cctx, key, "v")
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked = append(w.acked, key)
			if !failingSince.IsZero() {
				w.longest = max(w.longest, time.Since(failingSince))
				failingSince = time.Time{}
			}
		case ctx.Err() == nil:
			w.errs++
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBootstrapAndScale bootstraps one member, then scales 1 -> 3 -> 5 ->
// 3 -> 1 -> 3 while a writer writes through the client Service, checking
// etcd's member list after each step and, at the end, that every
// acknowledged write is there.
func TestBootstrapAndScale(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	t.Logf("1 member Ready after %s", awaitReady(ctx, t, key, 1).Round(time.Second))
	cli := etcdClient(ctx, t, ns, "scaled")
	assertMembers(ctx, t, cli, ns, 1)

	w := &writer{cli: cli}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.run(wctx); close(done) }()

	for _, n := range []int32{3, 5, 3, 1, 3} {
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Replicas = ptr.To(n)
		if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
			t.Fatal(err)
		}
		took := awaitReady(ctx, t, key, n)
		assertMembers(ctx, t, cli, ns, int(n))
		t.Logf("scaled to %d in %s", n, took.Round(time.Second))
	}
	stop()
	<-done

	resp, err := cli.Get(ctx, "/e2e/write/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = true
	}
	var lost []string
	for _, k := range w.acked {
		if !stored[k] {
			lost = append(lost, k)
		}
	}
	slices.Sort(lost)
	t.Logf("writer: %d writes acknowledged, %d failed, longest error window %s", len(w.acked), w.errs, w.longest.Round(time.Millisecond))
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged writes are lost: %v", len(lost), lost[:min(len(lost), 10)])
	}
	if len(w.acked) == 0 {
		t.Fatal("the writer never succeeded")
	}
}
