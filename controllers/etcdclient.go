package controllers

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/memberclient"
)

// EtcdClientFactory connects to the members of a cluster at endpoints,
// with the cluster's client TLS when it has any.
type EtcdClientFactory func(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string) (etcd.Client, error)

// NewEtcdClientFactory is the EtcdClientFactory of the real etcd client,
// configured by memberclient.Config on every call. The clients it makes
// are kept between passes (etcd.Pool): a cluster's client is reused until
// its endpoints or credentials change, or no pass used it for
// idleClientTimeout.
func NewEtcdClientFactory(reader client.Reader) EtcdClientFactory {
	pool := etcd.NewPool(etcd.New, idleClientTimeout)
	return func(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string) (etcd.Client, error) {
		cfg, err := memberclient.Config(ctx, reader, c, endpoints)
		if err != nil {
			return nil, err
		}
		return pool.Get(string(c.UID), cfg)
	}
}

// idleClientTimeout is how long a cluster's etcd client stays open
// without a pass using it: several health probes (DefaultProbeInterval).
const idleClientTimeout = 2 * time.Minute

// errNoMemberPods is connectMembers' error for a cluster without member
// Pods.
var errNoMemberPods = errors.New("the cluster has no member Pods")

// connectMembers connects to the members of c at the client URLs of its
// member Pods; the caller closes the client. Members are found through
// their Pods, not the cluster's status, so a reconciler other than the
// topology one needs no fresh status to reach them.
func connectMembers(ctx context.Context, reader client.Reader, connect EtcdClientFactory, c *etcdv1alpha1.EtcdCluster) (etcd.Client, error) {
	pods, err := memberPods(ctx, reader, c)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, errNoMemberPods
	}
	return connect(ctx, c, memberURLs(c, podNames(pods)))
}
