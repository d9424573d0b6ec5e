package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// TestHistoryIsCompacted checks that members compact their history
// without anyone asking: etcd compacts nothing by default, and a tenant's
// kube-apiserver runs with its own compactor off (docs/tenants.md), so
// without the operator's default a cluster's history would grow until
// NOSPACE.
//
//   - default: a cluster without options runs its member with the
//     operator's default (periodic, 5m), and etcd took it: its start-up
//     log reports that compaction. (A 5-minute period is too long to watch
//     here; the next case shows what the flags do, faster.)
//   - retention: with spec.options auto-compaction-retention: 10s (and no
//     mode: the operator then leaves both flags to the user, etcd's mode
//     is periodic), a writer overwrites keys under a tenant's prefix as a
//     kube-apiserver updating objects would; every revision seen as the
//     head is compacted within 2 minutes, three times over, so the
//     history stays bounded while the writes go on, and the latest value
//     of every key is still there.
func TestHistoryIsCompacted(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		support.Parallel(t, support.Short)
		ctx := context.Background()
		key := newCompactionCluster(ctx, t, "compact-default", nil)
		args := memberArgs(ctx, t, key, key.Name+"-0")
		for _, want := range []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m"} {
			if !slices.Contains(args, want) {
				t.Errorf("member args %v lack %s", args, want)
			}
		}
		support.Eventually(t, time.Minute, "etcd to log the compaction it runs with", func() error {
			log := env.ContainerLog(key.Namespace, key.Name+"-0", "etcd")
			for _, want := range []string{`"auto-compaction-mode":"periodic"`, `"auto-compaction-retention":"5m0s"`} {
				if !strings.Contains(log, want) {
					return fmt.Errorf("the member's log has no %s", want)
				}
			}
			return nil
		})
	})
	t.Run("retention", func(t *testing.T) {
		support.Parallel(t, support.Short)
		ctx := context.Background()
		key := newCompactionCluster(ctx, t, "compact-short", map[string]string{"auto-compaction-retention": "10s"})
		args := memberArgs(ctx, t, key, key.Name+"-0")
		if !slices.Contains(args, "--auto-compaction-retention=10s") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--auto-compaction-mode") }) {
			t.Errorf("member args %v: want the user's retention alone", args)
		}
		cli := etcdClient(ctx, t, key.Namespace, key.Name)
		w := &overwriter{cli: cli, keys: 20, latest: map[string]string{}}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.run(wctx) }()
		stopped := false
		defer func() {
			if !stopped {
				stop()
				<-done
			}
		}()

		for round := 1; round <= 3; round++ {
			head := headRevision(ctx, t, cli)
			start := time.Now()
			support.Eventually(t, 2*time.Minute, fmt.Sprintf("revision %d to be compacted (round %d)", head, round), func() error {
				return compacted(ctx, cli, head)
			})
			t.Logf("round %d: revision %d compacted %s after it was the head", round, head, time.Since(start).Round(100*time.Millisecond))
		}
		stop()
		<-done
		stopped = true

		w.mu.Lock()
		defer w.mu.Unlock()
		if w.acked == 0 {
			t.Fatalf("the writer got no write acknowledged (%d failed)", w.errs)
		}
		t.Logf("writer: %d writes acknowledged, %d failed", w.acked, w.errs)
		for k, v := range w.latest {
			resp, err := cli.Get(ctx, k)
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != v {
				t.Errorf("key %s after compaction: %v, %v; want its latest value %q", k, resp, err, v)
			}
		}
	})
}

// newCompactionCluster creates a one-member cluster with options and
// waits until it is Ready.
func newCompactionCluster(ctx context.Context, t *testing.T, name string, options map[string]string) client.ObjectKey {
	t.Helper()
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(ctx, t), Name: name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](1), Options: options,
			UnhealthyMemberTimeout: &metav1.Duration{Duration: time.Hour},
		},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 1)
	return key
}

// memberArgs returns the etcd container's args of a member's Pod.
func memberArgs(ctx context.Context, t *testing.T, key client.ObjectKey, member string) []string {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: member}, pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "etcd" {
			return c.Args
		}
	}
	t.Fatalf("Pod %s has no etcd container", member)
	return nil
}

// headRevision is the cluster's current revision.
func headRevision(ctx context.Context, t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	var rev int64
	support.Eventually(t, 30*time.Second, "the head revision", func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Get(cctx, "/", clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev
}

// compacted returns nil once revision rev is compacted: etcd then refuses
// a read at it with ErrCompacted.
func compacted(ctx context.Context, cli *clientv3.Client, rev int64) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := cli.Get(cctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(rev))
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("a read at revision %d still succeeds", rev)
}

// overwriter overwrites a few keys under a tenant's prefix in turn, as a
// kube-apiserver updating the same objects does, and remembers each key's
// latest acknowledged value (none after a failed write, which may have been
// applied).
type overwriter struct {
	cli    *clientv3.Client
	keys   int
	mu     sync.Mutex
	latest map[string]string
	acked  int
	errs   int
}

func (w *overwriter) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("/tenant-a/registry/configmaps/default/cm-%02d", i%w.keys)
		value := fmt.Sprintf("generation %d", i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.cli.Put(cctx, key, value)
		cancel()
		w.mu.Lock()
		if err == nil {
			w.latest[key] = value
			w.acked++
		} else {
			// The write may have been applied or not, also when the
			// writer was stopped while it was in flight: the key's value
			// is unknown until its next acknowledged write.
			delete(w.latest, key)
			if ctx.Err() == nil {
				w.errs++
			}
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}
