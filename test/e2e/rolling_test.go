package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// etcdImage sets the image of the members' etcd container.
func etcdImage(image string) etcdv1alpha1.PodTemplate {
	return etcdv1alpha1.PodTemplate{Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}}}
}

// memberPods lists the member Pods of a cluster that are not being deleted.
func memberPods(ctx context.Context, t *testing.T, key client.ObjectKey) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// availability samples a cluster's member Pods until stopped and remembers
// the fewest Ready at any time, and each change of which Pods are Ready.
type availability struct {
	mu       sync.Mutex
	fewest   int
	timeline []string
	stop     func()
	done     chan struct{}
}

func watchAvailability(ctx context.Context, t *testing.T, key client.ObjectKey) *availability {
	a := &availability{fewest: 1 << 30, done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	a.stop = stop
	start, last := time.Now(), ""
	go func() {
		defer close(a.done)
		for wctx.Err() == nil {
			pods := &corev1.PodList{}
			if err := k8sClient.List(wctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: key.Name}); err == nil {
				var ready, states []string
				for i := range pods.Items {
					p := &pods.Items[i]
					state := "not Ready"
					switch {
					case p.DeletionTimestamp != nil:
						state = "deleting"
					case podReady(p):
						state = "Ready"
						ready = append(ready, p.Name)
					}
					states = append(states, p.Name+" "+state)
				}
				a.mu.Lock()
				a.fewest = min(a.fewest, len(ready))
				if now := strings.Join(states, ", "); now != last {
					a.timeline = append(a.timeline, fmt.Sprintf("%5.1fs: %s", time.Since(start).Seconds(), now))
					last = now
				}
				a.mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return a
}

// log prints when each Pod was Ready, not Ready or being deleted.
func (a *availability) log(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	t.Logf("member Pods over time:\n%s", strings.Join(a.timeline, "\n"))
}

func (a *availability) finish() int {
	a.stop()
	<-a.done
	return a.fewest
}

// awaitRolled waits until every member Pod was built from the current spec
// and the cluster is Ready, and returns how long it took.
func awaitRolled(ctx context.Context, t *testing.T, key client.ObjectKey, replicas int32) time.Duration {
	t.Helper()
	start := time.Now()
	support.Eventually(t, 6*time.Minute, key.Name+" to roll every member", func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, key, c); err != nil {
			return err
		}
		// One read, so the counts are of the pass that saw this spec.
		ready := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
		if ready == nil || ready.ObservedGeneration != c.Generation || c.Status.UpdatedReplicas != replicas || c.Status.ReadyReplicas != replicas {
			return fmt.Errorf("updated %d, ready %d, Ready condition %v (generation %d)", c.Status.UpdatedReplicas, c.Status.ReadyReplicas, ready, c.Generation)
		}
		// The status counts members: a member the roll retired may still
		// have its Pod, about to be deleted or going away. The roll is
		// done when only the new members' Pods are left.
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: key.Name}); err != nil {
			return err
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, fmt.Sprintf("%s (deleting %v)", p.Name, p.DeletionTimestamp != nil))
		}
		if len(pods.Items) != int(replicas) || slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }) {
			return fmt.Errorf("member Pods %v, want %d", names, replicas)
		}
		return nil
	})
	awaitReady(ctx, t, key, replicas)
	return time.Since(start)
}

// clusterVersion asks a member's /version endpoint for the cluster version.
func clusterVersion(ctx context.Context, pod corev1.Pod) (server, cluster string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(pod.Status.PodIP, "2379")+"/version", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Server  string `json:"etcdserver"`
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", "", err
	}
	return v.Server, v.Cluster, nil
}

// setImage patches the cluster's etcd image.
func setImage(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, image string) {
	t.Helper()
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.PodTemplate = etcdImage(image)
	if err := k8sClient.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
}

// assertRefused checks that an image change is refused with a condition
// that says why, and that no member Pod is touched.
func assertRefused(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, image, says string) {
	t.Helper()
	key := client.ObjectKeyFromObject(c)
	before := map[types.UID]bool{}
	for _, p := range memberPods(ctx, t, key) {
		before[p.UID] = true
	}
	setImage(ctx, t, c, image)
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, says)
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s refused: %s", image, conditionMessage(cur, etcdv1alpha1.ConditionProgressing))
	time.Sleep(5 * time.Second) // give a wrong step the time to show
	for _, p := range memberPods(ctx, t, key) {
		if !before[p.UID] {
			t.Fatalf("Pod %s changed although %s was refused", p.Name, image)
		}
	}
}

func conditionMessage(c *etcdv1alpha1.EtcdCluster, typ string) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond.Reason + ": " + cond.Message
		}
	}
	return ""
}

// TestUpgrade35To36 runs a 3-member cluster on etcd 3.5.21, refuses a skip
// to 3.7, upgrades to 3.6.16 one member at a time while a writer writes
// (no acknowledged write lost, at most one member down at any time, etcd
// reports cluster version 3.6 at the end), grows its claims in place
// without replacing a Pod (its quota is its own: one the operator sized to
// the volume would grow too, and roll the members to take it up), then
// refuses a downgrade.
func TestUpgrade35To36(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgraded"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:    ptr.To[int32](3),
			PodTemplate: etcdImage("quay.io/coreos/etcd:v3.5.21"),
			Storage:     claimsOf(),
			Options:     map[string]string{"quota-backend-bytes": strconv.Itoa(64 << 20)},
		},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 3)
	assertRefused(ctx, t, cluster, "quay.io/coreos/etcd:v3.7.0", "upgrade to 3.6 first")

	cli := etcdClient(ctx, t, ns, key.Name)
	finish := support.StartWriter(ctx, t, cli)
	avail := watchAvailability(ctx, t, key)
	setImage(ctx, t, cluster, "quay.io/coreos/etcd:v3.6.16")
	took := awaitRolled(ctx, t, key, 3)
	fewest := avail.finish()
	finish()
	t.Logf("rolled 3 members from 3.5.21 to 3.6.16 in %s; fewest Ready members at any time: %d", took.Round(time.Second), fewest)
	if fewest < 2 {
		t.Errorf("%d members were Ready at one point of the roll, want at least 2 of 3", fewest)
	}
	support.Eventually(t, 2*time.Minute, "etcd to report cluster version 3.6", func() error {
		for _, p := range memberPods(ctx, t, key) {
			server, clusterV, err := clusterVersion(ctx, p)
			if err != nil {
				return err
			}
			if server != "3.6.16" || !strings.HasPrefix(clusterV, "3.6.") {
				return fmt.Errorf("%s: server %s, cluster %s", p.Name, server, clusterV)
			}
		}
		return nil
	})
	// Storage grows in place, without a roll.
	if err := k8sClient.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	before := map[types.UID]bool{}
	for _, p := range memberPods(ctx, t, key) {
		before[p.UID] = true
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Storage.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, 2*time.Minute, "every claim to grow to 1Gi", func() error {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := k8sClient.List(ctx, claims, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelCluster: key.Name}); err != nil {
			return err
		}
		for _, pvc := range claims.Items {
			if got := pvc.Status.Capacity.Storage().String(); got != "1Gi" {
				return fmt.Errorf("claim %s has %s", pvc.Name, got)
			}
		}
		return nil
	})
	for _, p := range memberPods(ctx, t, key) {
		if !before[p.UID] {
			t.Errorf("Pod %s was replaced to grow its claim", p.Name)
		}
	}

	if err := k8sClient.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	assertRefused(ctx, t, cluster, "quay.io/coreos/etcd:v3.5.21", "etcdctl downgrade enable 3.5")
}

// claimsOf is storage on a claim of 512Mi per member, the least allowed.
func claimsOf() etcdv1alpha1.StorageSpec {
	return etcdv1alpha1.StorageSpec{VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")}},
	}}}
}

// TestRollBySurge changes an etcd option of emptyDir clusters of 1, 2 and
// 3 members while a writer writes. Rolling an emptyDir member is a
// replacement, done by surge: the new member joins before the old one
// leaves, so every member stays Ready throughout, no acknowledged write is
// lost, and the cluster ends with as many voters, all on the new flags.
// (Deleting one Pod of two to rebuild it once cost the cluster its quorum
// for good.)
func TestRollBySurge(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int32{1, 2, 3} {
		t.Run(fmt.Sprintf("%d members", replicas), func(t *testing.T) {
			support.Parallel(t, support.Short)
			ctx := context.Background()
			ns := newNamespace(ctx, t)
			cluster := &etcdv1alpha1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "surged"},
				Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas)},
			}
			if err := k8sClient.Create(ctx, cluster); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(cluster)
			awaitReady(ctx, t, key, replicas)
			// The client Service routes to Ready Pods: measure from when
			// every member's Pod is.
			support.Eventually(t, time.Minute, "every member Pod to be Ready", func() error {
				for _, p := range memberPods(ctx, t, key) {
					if !podReady(&p) {
						return fmt.Errorf("%s is not Ready", p.Name)
					}
				}
				return nil
			})
			before := map[types.UID]bool{}
			for _, p := range memberPods(ctx, t, key) {
				before[p.UID] = true
			}
			cli := etcdClient(ctx, t, ns, key.Name)
			finish := support.StartWriter(ctx, t, cli)
			avail := watchAvailability(ctx, t, key)
			patch := client.MergeFrom(cluster.DeepCopy())
			cluster.Spec.Options = map[string]string{"snapshot-count": "5000"}
			if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
				t.Fatal(err)
			}
			took := awaitRolled(ctx, t, key, replicas)
			fewest := avail.finish()
			finish()
			t.Logf("rolled %d emptyDir members by surge in %s; fewest Ready members at any time: %d", replicas, took.Round(time.Second), fewest)
			if fewest < int(replicas) {
				avail.log(t)
				t.Errorf("%d members were Ready at one point of the roll, want all %d: a surge adds the new member before the old one leaves", fewest, replicas)
			}
			for _, p := range memberPods(ctx, t, key) {
				if before[p.UID] || !slices.Contains(p.Spec.Containers[0].Args, "--snapshot-count=5000") {
					t.Errorf("Pod %s (old: %v) has args %v", p.Name, before[p.UID], p.Spec.Containers[0].Args)
				}
			}
			assertMembers(ctx, t, cli, ns, int(replicas))
		})
	}
}

// TestRollOptionsAndResources changes etcd options and the etcd
// container's resources of a live cluster on claims while paused (nothing
// moves), then resumes: members restart in place from their claims one at
// a time, the operator crashes right after rolling a member and resumes
// the roll, and every member ends up with the new flags.
func TestRollOptionsAndResources(t *testing.T) {
	support.Parallel(t, support.Short)
	ctx := context.Background()
	operator := armCrashPoints(ctx, t, []string{"RollMember"})
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rolled"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Storage: claimsOf()},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	awaitReady(ctx, t, key, 3)
	before := map[types.UID]bool{}
	for _, p := range memberPods(ctx, t, key) {
		before[p.UID] = true
	}

	patch := client.MergeFrom(cluster.DeepCopy())
	metav1.SetMetaDataAnnotation(&cluster.ObjectMeta, etcdv1alpha1.AnnotationPaused, "true")
	cluster.Spec.Options = map[string]string{"election-timeout": "1500", "quota-backend-bytes": "268435456"}
	cluster.Spec.PodTemplate = etcdv1alpha1.PodTemplate{Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{
		Name:      "etcd",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}}}}
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, key, time.Minute, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, "etcd.aenix.io/paused")
	time.Sleep(5 * time.Second) // give a wrong step the time to show
	for _, p := range memberPods(ctx, t, key) {
		if !before[p.UID] {
			t.Fatalf("Pod %s changed while the cluster is paused", p.Name)
		}
	}

	cli := etcdClient(ctx, t, ns, key.Name)
	finish := support.StartWriter(ctx, t, cli)
	avail := watchAvailability(ctx, t, key)
	patch = client.MergeFrom(cluster.DeepCopy())
	delete(cluster.Annotations, etcdv1alpha1.AnnotationPaused)
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	took := awaitRolled(ctx, t, key, 3)
	fewest := avail.finish()
	finish()
	t.Logf("rolled 3 members in place in %s; fewest Ready members at any time: %d", took.Round(time.Second), fewest)
	if fewest < 2 {
		t.Errorf("%d members were Ready at one point of the roll, want at least 2 of 3", fewest)
	}
	for _, p := range memberPods(ctx, t, key) {
		args := p.Spec.Containers[0].Args
		if before[p.UID] || !slices.Contains(args, "--election-timeout=1500") || !slices.Contains(args, "--quota-backend-bytes=268435456") {
			t.Errorf("Pod %s (old: %v) has args %v", p.Name, before[p.UID], args)
		}
		if got := p.Spec.Containers[0].Resources.Requests.Memory().String(); got != "64Mi" {
			t.Errorf("Pod %s requests %s of memory, want 64Mi", p.Name, got)
		}
	}
	assertMembers(ctx, t, cli, ns, 3)
	if log := env.ContainerLog(operator.Namespace, operator.Name, "manager"); !strings.Contains(log, "crashpoint: crashing right after step RollMember") {
		t.Error("the operator never crashed after rolling a member")
	}
}
