package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
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
// move etcd's leadership to a follower while the cluster is paused, then
// resumes it, and then to defragment every member of a 3-member cluster:
// nothing moves while paused, then etcd itself names the follower as its
// leader, and each member is reported Defragmented once for the request
// and gives back the space of 16 MiB deleted before it.
func TestPluginMoveLeaderAndDefrag(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	cluster := newHealthCluster(ctx, t, "steer", nil)
	key := client.ObjectKeyFromObject(cluster)
	cli := etcdClient(ctx, t, key.Namespace, key.Name)
	ids := support.MemberIDs(ctx, t, cli)
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

	// Paused, the operator holds the request.
	if out := kubectlEtcd(ctx, t, key.Namespace, "pause", key.Name); !strings.Contains(out, "paused: the operator changes nothing of it") {
		t.Fatalf("pause printed %q", out)
	}
	var v kubectletcd.StatusView
	if err := json.Unmarshal([]byte(kubectlEtcd(ctx, t, key.Namespace, "status", key.Name, "-o", "json")), &v); err != nil || !v.Paused {
		t.Fatalf("status of a paused cluster: paused=%v (%v)", v.Paused, err)
	}
	if out := kubectlEtcd(ctx, t, key.Namespace, "move-leader", key.Name, "--to", target); !strings.Contains(out, "asked the operator to move leadership to "+target) {
		t.Fatalf("move-leader printed %q", out)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if l, err := leader(); err != nil || l != was {
			t.Fatalf("leader %x (%v) while paused, want %x still", l, err, was)
		}
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil || c.Annotations[etcdv1alpha1.AnnotationMoveLeader] != target {
			t.Fatalf("the request did not wait while paused: annotations %v (%v)", c.Annotations, err)
		}
	}
	start := time.Now()
	if out := kubectlEtcd(ctx, t, key.Namespace, "resume", key.Name); !strings.Contains(out, "resumed") {
		t.Fatalf("resume printed %q", out)
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
	t.Logf("leadership moved to %s %s after the resume", target, time.Since(start).Round(100*time.Millisecond))
	awaitNoAnnotation(ctx, t, key, 30*time.Second, etcdv1alpha1.AnnotationMoveLeader)

	// Something to give back: 16 MiB written, deleted and compacted
	// (below the 64Mi the operator defragments on its own).
	value := strings.Repeat("j", 1<<20)
	for i := range 16 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/junk/%02d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	del, err := cli.Delete(ctx, "/junk/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	dbSizes := func() map[string]int64 {
		sizes := map[string]int64{}
		for _, p := range memberPods(ctx, t, key) {
			st, err := cli.Status(ctx, "http://"+p.Status.PodIP+":2379")
			if err != nil {
				t.Fatalf("status of %s: %v", p.Name, err)
			}
			sizes[p.Name] = st.DbSize
		}
		return sizes
	}
	before := dbSizes()

	start = time.Now()
	if out := kubectlEtcd(ctx, t, key.Namespace, "defrag", key.Name, "--wait", "--timeout", "3m"); !strings.Contains(out, "asked the operator to defragment every voting member") ||
		!strings.Contains(out, "etcdcluster.etcd.aenix.io/"+key.Name+": done (etcd.aenix.io/defragment=all)") {
		t.Fatalf("defrag --wait printed %q", out)
	}
	awaitNoAnnotation(ctx, t, key, time.Second, etcdv1alpha1.AnnotationDefragment)
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
	after := dbSizes()
	t.Logf("database sizes before the defragmentation %v, after %v", before, after)
	for name, was := range before {
		if after[name] >= was {
			t.Errorf("%s's database is %d bytes after the defragmentation, %d before", name, after[name], was)
		}
	}
	// The cluster serves writes after its members' pauses.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(cctx, "/after-defrag", "yes"); err != nil {
		t.Errorf("write after the defragmentation: %v", err)
	}
}

// kubectl runs the local cluster's kubectl and returns its combined
// output and error.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.Bin("kubectl-v1.37.2"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// assertPluginShowsMembers checks kubectl etcd status and members, from
// the operator's status and --live from etcd itself, against the member
// list root reads from etcd: the same names and IDs, every member
// healthy, one leader.
func assertPluginShowsMembers(ctx context.Context, t *testing.T, ns, name string, root *clientv3.Client) {
	t.Helper()
	resp, err := root.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range resp.Members {
		want[m.Name] = fmt.Sprintf("%x", m.ID) // as etcdctl prints it, and the plugin
	}
	check := func(members []kubectletcd.MemberView) error {
		leaders := 0
		got := map[string]string{}
		for _, m := range members {
			got[m.Name] = m.ID
			if m.Healthy == nil || !*m.Healthy {
				return fmt.Errorf("%s is not shown healthy (%s)", m.Name, m.LastError)
			}
			if m.Role == "leader" {
				leaders++
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || leaders != 1 {
			return fmt.Errorf("members %v with %d leaders, etcd lists %v", got, leaders, want)
		}
		return nil
	}
	support.Eventually(t, 30*time.Second, "kubectl etcd status to show etcd's members", func() error {
		var v kubectletcd.StatusView
		if err := json.Unmarshal([]byte(kubectlEtcd(ctx, t, ns, "status", name, "-o", "json")), &v); err != nil {
			return err
		}
		return check(v.Members)
	})
	var live []kubectletcd.MemberView
	if err := json.Unmarshal([]byte(kubectlEtcd(ctx, t, ns, "members", name, "--live", "-o", "json")), &live); err != nil {
		t.Fatal(err)
	}
	if err := check(live); err != nil {
		t.Errorf("kubectl etcd members --live: %v", err)
	}
	if out := kubectlEtcd(ctx, t, ns, "status", name, "--live"); !strings.Contains(out, "Members (read from etcd now):") {
		t.Errorf("kubectl etcd status --live does not say its members are read from etcd:\n%s", out)
	}
}

// assertPluginCredentials runs the etcdctl command line kubectl etcd
// credentials prints for a tenant, as printed but for the path of
// etcdctl, in a Pod of the namespace (where the cluster's Service name
// resolves) that holds the tenant's Secret where --dir put its files: it
// writes and reads under the tenant's prefix and is refused outside it.
func assertPluginCredentials(ctx context.Context, t *testing.T, ns, tenant, prefix string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "creds")
	line := strings.TrimSpace(kubectlEtcd(ctx, t, ns, "credentials", tenant, "--dir", dir))
	secret := awaitTenantSecret(ctx, t, ns, tenant)
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if data, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Equal(data, secret.Data[f]) {
			t.Errorf("%s written by credentials --dir differs from the tenant's Secret (%v)", f, err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant + "-etcdctl"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: dir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}}},
		},
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	etcdctl := env.Bin("etcdctl-v3.6.16") + strings.TrimPrefix(line, "etcdctl")
	script := fmt.Sprintf("%s put %splugin yes && %s get %splugin --print-value-only", etcdctl, prefix, etcdctl, prefix)
	support.Eventually(t, time.Minute, "the printed etcdctl command line to work in a Pod", func() error {
		out, err := kubectl(ctx, "exec", "-n", ns, pod.Name, "--", "sh", "-c", script)
		if err != nil {
			return fmt.Errorf("%w: %q", err, out)
		}
		if out != "OK\nyes\n" {
			return fmt.Errorf("printed %q", out)
		}
		return nil
	})
	out, err := kubectl(ctx, "exec", "-n", ns, pod.Name, "--", "sh", "-c", etcdctl+" put /outside-"+tenant+" x")
	if err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("the printed command line writing outside %s: %v, %q; want permission denied", prefix, err, out)
	}
	_ = k8sClient.Delete(ctx, pod)
}
