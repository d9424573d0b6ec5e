package support

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EtcdClient connects to the etcd cluster name in ns through its client
// Service's ClusterIP, which the local cluster makes reachable from the
// host (plain HTTP: clusters without TLS). The test's end closes it.
func EtcdClient(ctx context.Context, t testing.TB, c client.Client, ns, name string) *clientv3.Client {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
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

// MemberIDs maps member names to IDs, from etcd.
func MemberIDs(ctx context.Context, t testing.TB, cli *clientv3.Client) map[string]uint64 {
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
