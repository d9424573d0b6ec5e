// Package olmlive installs the operator as OperatorHub users do, through
// the real Operator Lifecycle Manager on the local cluster
// (hack/localcluster/olm.yaml): cert-manager first, from the community
// catalog's stand-in; then a CatalogSource of the operator's catalog image,
// whose registry Pod runs opm over catalog/; OperatorGroups and
// Subscriptions in both install modes; OLM unpacking the bundles with its
// Jobs and installing the CSVs; an uninstall, a reinstall and an upgrade.
//
// make test runs it on a local cluster of its own, after the other suites
// of the cluster lane. On a cluster they ran on, TestMain first removes
// what they installed directly (the operator from config/default,
// cert-manager from hack/localcluster/cert-manager.yaml), since OLM
// installs both here.
package olmlive

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"

	"github.com/etcd-operator/etcd-operator/test/support"
)

var (
	env       *support.Env
	k8sClient client.Client
)

// catalogImage is the catalog image of the version under test, which `make
// local-images` made for the local cluster.
var catalogImage = flag.String("olm.catalog-image", os.Getenv("OLM_CATALOG_IMAGE"), "the catalog image to subscribe from")

func scheme() *runtime.Scheme {
	s := support.Scheme()
	for _, add := range []func(*runtime.Scheme) error{operatorsv1.AddToScheme, operatorsv1alpha1.AddToScheme, operatorsv2.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registrations do not fail
		}
	}
	return s
}

func TestMain(m *testing.M) {
	support.Run(m, filepath.Join("..", ".."), scheme(), func(e *support.Env, c client.Client) error {
		if *catalogImage == "" {
			return errors.New("no catalog image: run the tests with `make test`, which sets OLM_CATALOG_IMAGE and makes the image")
		}
		env, k8sClient = e, c
		if err := removeDirectInstalls(e); err != nil {
			return err
		}
		install := exec.Command(filepath.Join(e.Root, "hack", "localcluster", "install-olm.sh"), e.Bin("kubectl-v1.37.2"))
		install.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig())
		if out, err := install.CombinedOutput(); err != nil {
			return fmt.Errorf("installing OLM: %w\n%s", err, out)
		}
		return nil
	})
}

// removeDirectInstalls removes the operator the other suites installed from
// config/default (with its CRDs, so with every EtcdCluster they left) and
// the cert-manager controller they ran, as a user moving to OLM would.
func removeDirectInstalls(e *support.Env) error {
	// The objects with finalizers first, while the operator still runs to
	// remove them: tenants before the clusters they live in. A kind whose
	// CRD is not there (a fresh cluster) has none; asking kubectl to delete
	// it would fail, or pass only on a discovery cache left by an earlier
	// cluster at the same address.
	script := fmt.Sprintf(`set -euo pipefail
for kind in etcdtenants etcdbackupschedules etcdbackups etcdclusters; do
  if %[1]s get crd "$kind.etcd.aenix.io" >/dev/null 2>&1; then
    %[1]s delete "$kind" --all --all-namespaces --ignore-not-found --wait=true --timeout=3m >/dev/null
  fi
done
%[2]s build %[3]s/config/default | %[1]s delete --ignore-not-found --wait=true --timeout=5m -f - >/dev/null
%[1]s delete namespace cert-manager --ignore-not-found --wait=true --timeout=3m >/dev/null`,
		e.Bin("kubectl-v1.37.2"), e.Bin("kustomize-v5.8.2"), e.Root)
	cmd := exec.CommandContext(context.Background(), "bash", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("removing the operator and cert-manager installed without OLM: %w\n%s", err, out)
	}
	return nil
}
