// Package e2e holds the user stories of the operator on the local cluster:
// the operator is installed from config/ exactly as a user would install it
// (its own ServiceAccount and RBAC), and every claim is checked against the
// API server and, for etcd members, with a real etcd client.
//
// The suite runs on one local cluster with one operator, installed once.
// A test that touches only its own namespace (its clusters, its members and
// the faults aimed at them) calls support.Parallel, saying whether it is
// one of the few that take minutes (support.Long: they start first, so
// none runs on alone at the end); `go test -parallel` ($E2E_PARALLEL in
// the Makefile) bounds how many run at once. A table test whose body only
// starts subtests calls t.Parallel and its subtests support.Parallel. A
// test that takes the whole cluster (kills or replaces the operator, stops
// a node) calls neither, so Go runs it alone before the parallel group,
// and says why.
package e2e

import (
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-operator/etcd-operator/test/support"
)

var (
	env       *support.Env
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	support.Main(m, filepath.Join("..", ".."), func(e *support.Env, c client.Client) { env, k8sClient = e, c })
}
