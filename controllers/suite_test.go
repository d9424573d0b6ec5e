package controllers

// The controller tests run the reconcilers in a real manager against a real
// kube-apiserver and etcd (built by `make envtest-assets`).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
	"github.com/etcd-operator/etcd-operator/test/support"
)

var k8sClient client.Client

// managerCache and managerClient are the cache and client of the test
// manager, configured as the operator's (CacheOptions, NewClient).
var (
	managerCache  cache.Cache
	managerClient client.Client
)

// tenantEtcd is the etcd the tenant reconciler of the test manager sees.
var tenantEtcd = fake.New()

// unclosable keeps the shared fake open when a reconciler closes its
// client.
type unclosable struct{ *fake.Client }

func (unclosable) Close() error { return nil }

func TestMain(m *testing.M) {
	os.Exit(runWithManager(m))
}

func runWithManager(m *testing.M) int {
	cfg, c, stop, err := support.StartEnvtest(filepath.Join("..", "config", "crd", "bases"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	k8sClient = c
	scheme := support.Scheme()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: CacheOptions(nil), NewClient: NewClient})
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating manager: %v\n", err)
		return 1
	}
	managerCache, managerClient = mgr.GetCache(), mgr.GetClient()
	secretNames, err := NewSecretNamesCache(mgr, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating the cache of Secret names: %v\n", err)
		return 1
	}
	// envtest runs no Pods, so no member ever answers.
	noEtcd := func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
		return nil, errors.New("envtest runs no etcd members")
	}
	if err := (&TopologyReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), NewEtcdClient: noEtcd}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up the topology reconciler: %v\n", err)
		return 1
	}
	if err := (&HealthReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), NewEtcdClient: noEtcd}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up the health reconciler: %v\n", err)
		return 1
	}
	// envtest serves no cert-manager API: operator-managed clusters wait.
	if err := (&PKIReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), SecretNames: secretNames}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up the PKI reconciler: %v\n", err)
		return 1
	}
	// The tenant reconciler talks to one fake etcd for every cluster.
	tenantConnect := func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
		return unclosable{tenantEtcd}, nil
	}
	if err := (&TenantReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), NewEtcdClient: tenantConnect}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up the tenant reconciler: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "manager stopped with an error: %v\n", err)
		}
	}()

	return m.Run()
}

func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controllers-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	support.Eventually(t, timeout, what, check)
}
