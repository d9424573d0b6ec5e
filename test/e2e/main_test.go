// Package e2e holds the user stories of the operator on the local cluster:
// the operator is installed from config/ exactly as a user would install it
// (its own ServiceAccount and RBAC), and every claim is checked against the
// API server and, for etcd members, with a real etcd client.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
	if err := installOperator(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// installOperator installs the operator from config/default with
// server-side apply, as the README tells users, and waits for it to run.
func installOperator() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kubectl, kustomize := env.Bin("kubectl-v1.37.2"), env.Bin("kustomize-v5.8.2")
	script := fmt.Sprintf(`set -euo pipefail
%[2]s build %[3]s/config/default | %[1]s apply --server-side --force-conflicts -f -
%[1]s -n etcd-operator-system rollout restart deployment/etcd-operator-controller-manager
%[1]s -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=150s`, kubectl, kustomize, env.Root)
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("installing the operator from config/default: %w\n%s", err, out)
	}
	return nil
}
