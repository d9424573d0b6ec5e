// Package chaos is the randomized fault campaign: a seeded sequence of
// spec changes (scale, option changes that roll, an etcd upgrade, TLS
// renewal) and faults (kill, pause, cut, delete a Pod, wipe data, stop a
// node, kill the operator, refuse Pod creation for a while) against
// clusters of several shapes, each with a writer, and invariants checked
// on etcd itself. A failure prints the seed and the steps, so
//
//	make chaos SEED=<seed> STEPS=<steps>
//
// replays it. CI runs one short fixed seed (make test).
package chaos

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
