package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/kubectletcd"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// kubectlEtcd runs the kubectl etcd plugin in this process, with the
// local cluster's kubeconfig, in namespace ns, and returns what it
// printed.
func kubectlEtcd(ctx context.Context, t *testing.T, ns string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := kubectletcd.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", env.Kubeconfig(), "-n", ns}, args...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("kubectl etcd %s: %v (stderr %q)", strings.Join(args, " "), err, errOut.String())
	}
	t.Logf("kubectl etcd %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String()
}

// awaitNoAnnotation waits until the operator has removed a request's
// annotation: it is done.
func awaitNoAnnotation(ctx context.Context, t *testing.T, key client.ObjectKey, timeout time.Duration, annotation string) {
	t.Helper()
	support.Eventually(t, timeout, fmt.Sprintf("the operator to carry out and remove %s on %s", annotation, key.Name), func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		if v, ok := c.Annotations[annotation]; ok {
			return fmt.Errorf("%s=%s is still there; Maintenance: %q", annotation, v, conditionMessage(c, etcdv1alpha1.ConditionMaintenance))
		}
		return nil
	})
}

// TestPluginMoveLeaderAndDefrag asks the operator, with kubectl etcd, to
// move etcd's leadership to a follower and then to defragment every
// member of a 3-member cluster: etcd itself names the follower as its
// leader, and each member is reported Defragmented once for the request.
func TestPluginMoveLeaderAndDefrag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "steer", nil)
	key := client.ObjectKeyFromObject(cluster)
	cli := etcdClient(ctx, t, key.Namespace, key.Name)
	ids := memberIDs(ctx, t, cli)
	leader := func() (uint64, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Status(cctx, cli.Endpoints()[0])
		if err != nil {
			return 0, err
		}
		return resp.Leader, nil
	}
	was, err := leader()
	if err != nil {
		t.Fatal(err)
	}
	target := ""
	for _, name := range []string{"steer-0", "steer-1", "steer-2"} {
		if ids[name] != was && target == "" {
			target = name
		}
	}
	if target == "" {
		t.Fatalf("no follower among the members %v (leader %x)", ids, was)
	}

	start := time.Now()
	if out := kubectlEtcd(ctx, t, key.Namespace, "move-leader", key.Name, "--to", target); !strings.Contains(out, "asked the operator to move leadership to "+target) {
		t.Fatalf("move-leader printed %q", out)
	}
	support.Eventually(t, time.Minute, "etcd to name "+target+" its leader", func() error {
		l, err := leader()
		if err != nil {
			return err
		}
		if l != ids[target] {
			return fmt.Errorf("leader is %x, not %s (%x)", l, target, ids[target])
		}
		return nil
	})
	t.Logf("leadership moved to %s %s after the request", target, time.Since(start).Round(100*time.Millisecond))
	awaitNoAnnotation(ctx, t, key, 30*time.Second, etcdv1alpha1.AnnotationMoveLeader)

	start = time.Now()
	if out := kubectlEtcd(ctx, t, key.Namespace, "defrag", key.Name); !strings.Contains(out, "asked the operator to defragment every voting member") {
		t.Fatalf("defrag printed %q", out)
	}
	awaitNoAnnotation(ctx, t, key, 3*time.Minute, etcdv1alpha1.AnnotationDefragment)
	t.Logf("every member defragmented %s after the request", time.Since(start).Round(100*time.Millisecond))
	support.Eventually(t, 30*time.Second, "a Defragmented event for each member", func() error {
		events := &corev1.EventList{}
		if err := k8sClient.List(ctx, events, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		seen := map[string]int{}
		for _, e := range events.Items {
			if e.Reason == "Defragmented" && strings.Contains(e.Message, etcdv1alpha1.AnnotationDefragment+"=all") {
				for name := range ids {
					if strings.HasPrefix(e.Message, "Defragmented "+name+" ") {
						seen[name]++
					}
				}
			}
		}
		if len(seen) != len(ids) {
			return fmt.Errorf("requested Defragmented events by member: %v, want one for each of %d", seen, len(ids))
		}
		return nil
	})
	if c := (&etcdv1alpha1.EtcdCluster{}); k8sClient.Get(ctx, key, c) == nil {
		if v, ok := c.Annotations[etcdv1alpha1.AnnotationDefragmented]; ok {
			t.Errorf("the request's progress %s=%s outlived it", etcdv1alpha1.AnnotationDefragmented, v)
		}
	}
	// The cluster serves writes after its members' pauses.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(cctx, "/after-defrag", "yes"); err != nil {
		t.Errorf("write after the defragmentation: %v", err)
	}
}
