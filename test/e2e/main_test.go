// Package e2e holds the user stories of the operator on the local cluster:
// the operator is installed from config/ exactly as a user would install it
// (its own ServiceAccount and RBAC), and every claim is checked against the
// API server and, for etcd members, with a real etcd client.
//
// The suite runs on one local cluster with one operator, installed once.
// A test that touches only its own namespace (its clusters, its members and
// the faults aimed at them) calls t.Parallel(); `go test -parallel`
// ($E2E_PARALLEL in the Makefile) bounds how many run at once. A test that
// takes the whole cluster (kills or replaces the operator, stops a node)
// does not, so Go runs it alone before the parallel group, and says why.
package e2e

import (
	"fmt"
	"os"
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
	e, stop, err := support.Start(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	code, err := run(m)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	c, err := client.New(env.Config, client.Options{Scheme: support.Scheme()})
	if err != nil {
		return 0, err
	}
	k8sClient = c
	// cert-manager first: the operator looks for its API when it starts.
	if err := env.InstallCertManager(); err != nil {
		return 0, err
	}
	if err := env.InstallOperator(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
