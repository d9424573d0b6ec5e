// Package e2e holds the user stories of the operator on the local cluster:
// the operator is installed from config/ exactly as a user would install it
// (its own ServiceAccount and RBAC), and every claim is checked against the
// API server and, for etcd members, with a real etcd client.
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
	if err := env.InstallOperator(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
