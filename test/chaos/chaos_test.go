package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/localcluster"
	"github.com/etcd-operator/etcd-operator/test/chaos/history"
	"github.com/etcd-operator/etcd-operator/test/support"
)

var (
	seeds = flag.String("chaos.seed", "1", "seeds of the campaign's random steps, comma-separated: each runs in turn on the same local cluster")
	steps = flag.Int("chaos.steps", 10, "number of steps of each seed")
)

// recoveryBound is how long every cluster has to be Ready again once the
// faults stop.
const recoveryBound = 6 * time.Minute

// shape is a cluster the campaign runs.
type shape struct {
	name     string
	replicas int32
	claims   bool
	// secure clusters have TLS through cert-manager and etcd
	// authentication; the writer is root, by its client certificate.
	secure bool
	// image is the etcd image it starts on; "" is the operator's default.
	image string
}

var shapes = []shape{
	{name: "one", replicas: 1},
	{name: "two", replicas: 2, claims: true, image: "quay.io/coreos/etcd:v3.5.21"},
	{name: "three", replicas: 3, secure: true},
	{name: "five", replicas: 5, claims: true},
}

// target is one cluster under the campaign, with its writer's history and
// samples of its members' health.
type target struct {
	shape
	key     client.ObjectKey
	cli     *clientv3.Client
	tls     *tls.Config // nil without TLS
	hist    *history.History
	samples *sampler
	// backups are the EtcdBackups the campaign took of the cluster.
	backups []backupTaken
	// lossFrom and lossTo (History.Now) bound the step that lost a
	// majority of its members with their data, at most one a campaign;
	// zero when none did.
	lossFrom, lossTo int64
}

// backupTaken is an EtcdBackup and when (History.Now) it was asked for:
// its snapshot must hold every put acknowledged before then.
type backupTaken struct {
	name  string
	asked int64
}

// TestChaos runs the campaign of each seed in turn.
func TestChaos(t *testing.T) {
	for _, field := range strings.Split(*seeds, ",") {
		seed, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
		if err != nil {
			t.Fatalf("-chaos.seed=%q: %q is not a number; give seeds like 7 or 7,8,9", *seeds, field)
		}
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { campaign(t, seed) })
	}
}

// campaign creates the clusters, starts a writer on each, takes the
// seeded steps, lets every cluster recover, and checks the invariants.
func campaign(t *testing.T, seed int64) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("chaos: seed %d, %d steps; replay with: make chaos SEED=%d STEPS=%d", seed, *steps, seed, *steps)
	var taken []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos: seed %d failed after the steps:\n%s\nreplay with: make chaos SEED=%d STEPS=%d", seed, strings.Join(taken, "\n"), seed, *steps)
		}
	})

	var targets []*target
	for _, s := range shapes {
		targets = append(targets, create(ctx, t, s))
	}
	for _, tg := range targets {
		connect(ctx, t, tg)
	}
	wctx, stopWriters := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for _, tg := range targets {
		writers.Go(func() { write(wctx, tg) })
		writers.Go(func() { tg.samples.run(wctx) })
	}

	for i := range *steps {
		tg := targets[rng.Intn(len(targets))]
		s := pickStep(rng, tg)
		line := fmt.Sprintf("step %d: %s on %s", i+1, s.name, tg.name)
		if s.destroys && !redundant(ctx, tg) {
			line += " (skipped: it would destroy the data of a member the cluster cannot spare now)"
			s.do = nil
		}
		if s.do != nil {
			what, err := s.do(ctx, tg)
			if what != "" {
				line += ": " + what
			}
			if err != nil {
				line += fmt.Sprintf(" (failed: %v)", err)
			}
		}
		taken = append(taken, line)
		t.Log(line)
		time.Sleep(time.Duration(3+rng.Intn(8)) * time.Second)
	}

	// Give the last fault the time to show before judging recovery.
	time.Sleep(20 * time.Second)
	start := time.Now()
	for _, tg := range targets {
		awaitReady(ctx, t, tg)
	}
	t.Logf("chaos: every cluster Ready %s after the last step", time.Since(start).Round(time.Second))
	stopWriters()
	writers.Wait()
	for _, tg := range targets {
		check(ctx, t, tg)
	}
}

// create makes the cluster of shape s in a namespace of its own.
func create(ctx context.Context, t *testing.T, s shape) *target {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-" + s.name + "-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	env.DumpOnFailure(t, ns.Name)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	// Recovery from a quorum lost for good is armed: no step loses a
	// majority's data, so a rebuild (a new cluster ID, writes lost) is a
	// quorum that would have come back judged gone, and check fails it.
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: s.name}, Spec: etcdv1alpha1.EtcdClusterSpec{
		Replicas:               ptr.To(s.replicas),
		UnhealthyMemberTimeout: &metav1.Duration{Duration: 30 * time.Second},
		Recovery:               &etcdv1alpha1.RecoverySpec{QuorumLoss: etcdv1alpha1.QuorumLossAutomatic},
	}}
	if s.image != "" {
		c.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: builder.EtcdContainerName, Image: s.image}}
	}
	if s.claims {
		c.Spec.Storage.VolumeClaimTemplate = &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")}},
		}}
	}
	if s.secure {
		c.Spec.Security = &etcdv1alpha1.SecuritySpec{EnableAuth: true, TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}}
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	return &target{shape: s, key: client.ObjectKeyFromObject(c), hist: history.New()}
}

// connect waits until tg's cluster is Ready (and, when secure, its
// authentication on) and connects to it.
func connect(ctx context.Context, t *testing.T, tg *target) {
	t.Helper()
	awaitReady(ctx, t, tg)
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, tg.key, c); err != nil {
		t.Fatal(err)
	}
	if tg.secure {
		tg.tls = rootTLS(ctx, t, c)
		// Authentication goes on after the cluster is Ready.
		support.Eventually(t, 2*time.Minute, tg.name+" to turn authentication on", func() error {
			if err := k8sClient.Get(ctx, tg.key, c); err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAuthentication); cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("authentication: %v", cond)
			}
			return nil
		})
	}
	tg.cli = serviceClient(ctx, t, c, tg.tls)
	tg.samples = &sampler{target: tg}
}

// redundant tells whether tg's cluster can lose one member's data now: it
// is Ready with at least three voters, all healthy by the last sample. A
// fault that destroys data beyond that (the only member of a cluster, or
// two of three at once) loses data whatever an operator does.
func redundant(ctx context.Context, tg *target) bool {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, tg.key, c); err != nil {
		return false
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return false
	}
	last, ok := tg.samples.last()
	return ok && len(last.voters) >= 3 && othersHealthy(last, "") == len(last.voters)
}

// rootTLS is the TLS configuration of the operator's root client
// certificate of secure cluster c, trusting its CA.
func rootTLS(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) *tls.Config {
	t.Helper()
	var cfg *tls.Config
	support.Eventually(t, 2*time.Minute, "the client certificate of "+c.Name, func() error {
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.ClientTLSSecretName(c)}, s); err != nil {
			return err
		}
		pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		if err != nil {
			return err
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
			return errors.New("no ca.crt")
		}
		cfg = &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		return nil
	})
	return cfg
}

// serviceClient connects to cluster c through its client Service.
func serviceClient(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster, cfg *tls.Config) *clientv3.Client {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, svc); err != nil {
		t.Fatal(err)
	}
	cli, err := newClient(net.JoinHostPort(svc.Spec.ClusterIP, "2379"), c.Name+"."+c.Namespace+".svc", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newClient connects to one address; with TLS, the server's certificate
// is checked for serverName.
func newClient(addr, serverName string, cfg *tls.Config) (*clientv3.Client, error) {
	conf := clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 3 * time.Second, Logger: zap.NewNop()}
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.ServerName = serverName
		conf.Endpoints = []string{"https://" + addr}
		conf.TLS = cfg
		conf.DialOptions = []grpc.DialOption{grpc.WithAuthority(serverName)}
	}
	return clientv3.New(conf)
}

// write puts and reads eight keys in turn until ctx ends, recording each
// operation: every put writes a value never written before (its
// sequence number).
func write(ctx context.Context, tg *target) {
	for i := 0; ctx.Err() == nil; i++ {
		o := history.Op{Key: fmt.Sprintf("/chaos/k%d", (i/2)%8), Put: i%2 == 0, Call: tg.hist.Now()}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var clusterID uint64
		var err error
		if o.Put {
			o.Value = strconv.Itoa(i)
			var resp *clientv3.PutResponse
			if resp, err = tg.cli.Put(cctx, o.Key, o.Value); err == nil {
				clusterID = resp.Header.ClusterId
			}
		} else {
			var resp *clientv3.GetResponse
			if resp, err = tg.cli.Get(cctx, o.Key); err == nil {
				clusterID = resp.Header.ClusterId
				if len(resp.Kvs) == 1 {
					o.Value = string(resp.Kvs[0].Value)
				}
			}
		}
		cancel()
		tg.hist.Add(o, clusterID, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitReady waits until tg's cluster is Ready with the members its spec
// asks for, as the status of its current generation says.
func awaitReady(ctx context.Context, t *testing.T, tg *target) {
	t.Helper()
	support.Eventually(t, recoveryBound, tg.name+" to be Ready", func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, tg.key, c); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != c.Generation || c.Status.UpdatedReplicas != c.DesiredReplicas() {
			return fmt.Errorf("updated %d of %d, Ready %v", c.Status.UpdatedReplicas, c.DesiredReplicas(), ready)
		}
		return nil
	})
}

// check verifies the invariants on tg once its writer stopped.
func check(ctx context.Context, t *testing.T, tg *target) {
	t.Helper()
	final := map[string]string{}
	support.Eventually(t, time.Minute, "a final read of "+tg.name, func() error {
		resp, err := tg.cli.Get(ctx, "/chaos/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			final[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	acked, failed, reads := tg.hist.Counts()
	t.Logf("%s: %d puts acknowledged, %d failed, %d reads", tg.name, acked, failed, reads)
	if acked == 0 {
		t.Errorf("%s: the writer never succeeded", tg.name)
	}
	rebuilt := int64(math.MaxInt64)
	if tg.lossTo != 0 {
		rebuilt = checkRebuilt(ctx, t, tg, final)
	} else {
		if lost := tg.hist.LostWrites(final); len(lost) > 0 {
			t.Errorf("%s: acknowledged writes lost: %v", tg.name, lost)
		}
		if ids := tg.hist.ClusterIDs(); len(ids) != 1 {
			t.Errorf("%s: etcd answered with %d cluster IDs %x, want one", tg.name, len(ids), ids)
		}
		if c := (&etcdv1alpha1.EtcdCluster{}); k8sClient.Get(ctx, tg.key, c) == nil && c.Status.Recovery != nil {
			t.Errorf("%s: rebuilt from a survivor (%+v), though no step lost a majority's data", tg.name, *c.Status.Recovery)
		}
		if seen := tg.samples.quorumsLostForGood(); len(seen) > 0 {
			t.Errorf("%s: a quorum reported lost for good %d times, though no step lost a majority's data; first: %s", tg.name, len(seen), seen[0])
		}
	}
	switch res := tg.hist.LinearizableRebuilt(2*time.Minute, rebuilt); res {
	case porcupine.Illegal:
		t.Errorf("%s: the history of puts and reads is not linearizable", tg.name)
	case porcupine.Unknown:
		t.Logf("%s: the linearizability check did not finish in time; inconclusive", tg.name)
	}
	for _, v := range tg.samples.violations(ctx, tg) {
		t.Errorf("%s: %s", tg.name, v)
	}
	for _, b := range tg.backups {
		checkBackup(ctx, t, tg, b, rebuilt)
	}
}

// checkRebuilt checks tg, which lost a majority with its data, once its
// writer stopped: the operator rebuilt it from a survivor (status.recovery
// complete); every answer before the rebuild started carried the old
// cluster ID, every one after the new; the puts acknowledged more than a
// second before the loss (the survivors, healthy followers, held them)
// and those after the rebuild started are all there. It returns when the
// rebuild started (History.Now), where the history splits.
func checkRebuilt(ctx context.Context, t *testing.T, tg *target, final map[string]string) int64 {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, tg.key, c); err != nil {
		t.Errorf("%s: %v", tg.name, err)
		return math.MaxInt64
	}
	rec := c.Status.Recovery
	if rec == nil || rec.StartedAt.IsZero() || rec.CompletedAt == nil {
		t.Errorf("%s: lost a majority with its data, and status.recovery is %+v, want a complete rebuild", tg.name, rec)
		return math.MaxInt64
	}
	rebuilt := tg.hist.At(rec.StartedAt.Time)
	for _, o := range tg.hist.Acknowledged() {
		want := rec.FromClusterID
		if o.Call >= rebuilt {
			want = c.Status.ClusterID
		}
		if o.ClusterID != 0 && etcd.FormatID(o.ClusterID) != want {
			t.Errorf("%s: an answer at %s carried cluster ID %s, want %s (rebuilt at %s)", tg.name,
				time.Duration(o.Ret), etcd.FormatID(o.ClusterID), want, time.Duration(rebuilt))
			break
		}
	}
	margin := time.Second.Nanoseconds()
	if lost := tg.hist.LostWritesAmong(final, func(o history.Op) bool { return o.Ret < tg.lossFrom-margin }); len(lost) > 0 {
		t.Errorf("%s: writes acknowledged before the loss lost: %v", tg.name, lost)
	}
	if lost := tg.hist.LostWritesAmong(final, func(o history.Op) bool { return o.Call >= rebuilt }); len(lost) > 0 {
		t.Errorf("%s: writes acknowledged after the rebuild lost: %v", tg.name, lost)
	}
	t.Logf("%s: rebuilt from %s (plan %s, %d entries at risk), cluster %s to %s, resumed at revision %d, %s after the loss",
		tg.name, rec.Survivor, rec.PlanID, rec.EntriesAtRisk, rec.FromClusterID, c.Status.ClusterID, rec.ResumedAtRevision,
		(time.Duration(tg.hist.At(rec.CompletedAt.Time) - tg.lossTo)).Round(time.Second))
	return rebuilt
}

// backupClaim is the claim in each cluster's namespace its backups go to.
const backupClaim = "backups"

// takeBackup asks for a backup of tg onto a claim, and goes on at once:
// the backup runs through whatever the next steps do.
func takeBackup(ctx context.Context, tg *target) (string, error) {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: backupClaim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8sClient.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	name := fmt.Sprintf("backup-%d", len(tg.backups)+1)
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: tg.key.Name, Destination: etcdv1alpha1.BackupDestination{
			Volume: &etcdv1alpha1.VolumeDestination{ClaimName: backupClaim, Path: "chaos"},
		}},
	}
	asked := tg.hist.Now()
	if err := k8sClient.Create(ctx, b); err != nil {
		return "", err
	}
	tg.backups = append(tg.backups, backupTaken{name: name, asked: asked})
	return "EtcdBackup " + name, nil
}

// checkBackup: a backup the campaign took succeeded, whatever happened
// meanwhile, and its snapshot holds every put acknowledged before it was
// asked for, but those a rebuild (at rebuilt) may have lost.
func checkBackup(ctx context.Context, t *testing.T, tg *target, taken backupTaken, rebuilt int64) {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{}
	support.Eventually(t, 5*time.Minute, "backup "+taken.name+" of "+tg.name+" to end", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: tg.key.Namespace, Name: taken.name}, b); err != nil {
			return err
		}
		if b.Status.Phase != etcdv1alpha1.BackupSucceeded && b.Status.Phase != etcdv1alpha1.BackupFailed {
			return fmt.Errorf("phase %s, conditions %v", b.Status.Phase, b.Status.Conditions)
		}
		return nil
	})
	if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
		t.Errorf("%s: backup %s failed: %v", tg.name, taken.name, b.Status.Conditions)
		return
	}
	root, err := support.ClaimPath(ctx, k8sClient, tg.key.Namespace, backupClaim)
	if err != nil {
		t.Error(err)
		return
	}
	keys, err := support.SnapshotKeys(filepath.Join(root, filepath.FromSlash(b.Status.Key)))
	if err != nil {
		t.Errorf("%s: backup %s: %v", tg.name, taken.name, err)
		return
	}
	atRisk := func(o history.Op) bool {
		return tg.lossTo != 0 && o.Ret >= tg.lossFrom-time.Second.Nanoseconds() && o.Call < rebuilt
	}
	if lost := tg.hist.LostWritesAmong(keys, func(o history.Op) bool { return o.Ret < taken.asked && !atRisk(o) }); len(lost) > 0 {
		t.Errorf("%s: backup %s (revision %d, from %s, attempt %d) lacks acknowledged writes: %v", tg.name, taken.name, b.Status.Revision, b.Status.Member, b.Status.Attempts, lost)
	}
	t.Logf("%s: backup %s holds every write acknowledged before it (revision %d from %s, attempt %d)", tg.name, taken.name, b.Status.Revision, b.Status.Member, b.Status.Attempts)
}

// step is one thing the campaign does to a cluster. A step that destroys
// a member's data is only taken while the cluster can spare it.
type step struct {
	name     string
	do       func(ctx context.Context, tg *target) (string, error)
	destroys bool
}

// pickStep chooses what to do to tg: a spec change or a fault.
func pickStep(rng *rand.Rand, tg *target) step {
	pick := func(xs []int32) int32 { return xs[rng.Intn(len(xs))] }
	deleteDestroys := !tg.claims
	choice := rng.Int() // drawn now, so a seed replays the same steps
	steps := []step{
		{name: "scale", do: func(ctx context.Context, tg *target) (string, error) {
			n := pick([]int32{1, 2, 3, 5})
			return patchSpec(ctx, tg, fmt.Sprintf("replicas %d", n), func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To(n) })
		}},
		{name: "roll", do: func(ctx context.Context, tg *target) (string, error) {
			v := strconv.Itoa(10000 + rng.Intn(10000))
			return patchSpec(ctx, tg, "snapshot-count "+v, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Options = map[string]string{"snapshot-count": v} })
		}},
		{name: "kill a member", do: memberFault(rng, localcluster.FaultKill, "")},
		{name: "pause a member for 10s", do: memberFault(rng, localcluster.FaultPause, localcluster.FaultResume)},
		{name: "cut a member off for 10s", do: memberFault(rng, localcluster.FaultCut, localcluster.FaultHeal)},
		{name: "delete a member's Pod", do: memberFault(rng, localcluster.FaultDeletePod, ""), destroys: deleteDestroys},
		{name: "wipe a member's data", do: memberFault(rng, localcluster.FaultWipe, ""), destroys: true},
		{name: "lose a majority with its data", do: loseQuorum(rng), destroys: true},
		{name: "stop a member's node for 20s", do: stopNode(rng)},
		{name: "throttle a member for 10s", do: memberFault(rng, localcluster.FaultThrottle, localcluster.FaultUnthrottle)},
		{name: "ask to defragment every member", do: request(etcdv1alpha1.AnnotationDefragment, func([]corev1.Pod) string { return etcdv1alpha1.DefragmentAll })},
		{name: "ask to move the leader", do: request(etcdv1alpha1.AnnotationMoveLeader, func(pods []corev1.Pod) string { return pods[choice%len(pods)].Name })},
		{name: "kill the operator", do: killOperator},
		{name: "take a backup", do: takeBackup},
		{name: "refuse new Pods for 20s", do: refusePods},
	}
	if tg.image != "" {
		steps = append(steps, step{name: "upgrade to 3.6", do: func(ctx context.Context, tg *target) (string, error) {
			return patchSpec(ctx, tg, "image "+builder.DefaultEtcdImage, func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: builder.EtcdContainerName, Image: builder.DefaultEtcdImage}}
			})
		}})
	}
	if tg.claims {
		// A claim is a file system of its size; an emptyDir on the local
		// cluster is the host's, and filling it would fill the host.
		steps = append(steps, step{name: "fill a member's volume for 10s", do: memberFault(rng, localcluster.FaultFill, localcluster.FaultFree)})
	}
	if tg.secure {
		steps = append(steps, step{name: "renew the server certificate", do: func(ctx context.Context, tg *target) (string, error) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: tg.key.Name + "-server-tls"}}
			return "deleted Secret " + s.Name, k8sClient.Delete(ctx, s)
		}})
	}
	return steps[rng.Intn(len(steps))]
}

func patchSpec(ctx context.Context, tg *target, what string, change func(*etcdv1alpha1.EtcdCluster)) (string, error) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, tg.key, c); err != nil {
		return what, err
	}
	patch := client.MergeFrom(c.DeepCopy())
	change(c)
	return what, k8sClient.Patch(ctx, c, patch)
}

// memberFault injects action into a random member's etcd container (or
// Pod, or data volume), and, when heal is set, heals it 10 s later.
func memberFault(rng *rand.Rand, action, heal string) func(context.Context, *target) (string, error) {
	choice := rng.Int()
	return func(ctx context.Context, tg *target) (string, error) {
		pods := memberPods(ctx, tg)
		if len(pods) == 0 {
			return "", errors.New("no member Pod")
		}
		p := pods[choice%len(pods)]
		f := localcluster.Fault{Action: action, Namespace: p.Namespace, Pod: p.Name, Container: builder.EtcdContainerName}
		if action == localcluster.FaultWipe || action == localcluster.FaultFill {
			f.Volume = builder.DataVolumeName
		}
		if err := env.Faults.Inject(ctx, f); err != nil {
			return p.Name, err
		}
		if action == localcluster.FaultWipe {
			return p.Name, env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultKill, Namespace: p.Namespace, Pod: p.Name, Container: builder.EtcdContainerName})
		}
		if heal == "" {
			return p.Name, nil
		}
		time.Sleep(10 * time.Second)
		f.Action = heal
		err := env.Faults.Inject(ctx, f)
		// A claim outlives its Pod: a full one deleted meanwhile comes
		// back on the same claim, which must not stay full. A member
		// retired meanwhile (a roll that replaced it) goes with its
		// claim, and nothing is left full: waiting for its Pod to come
		// back took this step the whole two minutes (seed 1 in CI, when
		// the fill met the upgrade's roll).
		for deadline := time.Now().Add(2 * time.Minute); err != nil && heal == localcluster.FaultFree && time.Now().Before(deadline); {
			if claimGone(ctx, p.Namespace, builder.ClaimName(p.Name)) {
				return p.Name + " (retired meanwhile, with its claim)", nil
			}
			time.Sleep(2 * time.Second)
			err = env.Faults.Inject(ctx, f)
		}
		return p.Name, err
	}
}

// claimGone tells whether claim name is deleted or being deleted.
func claimGone(ctx context.Context, namespace, name string) bool {
	claim := &corev1.PersistentVolumeClaim{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim)
	return apierrors.IsNotFound(err) || (err == nil && claim.DeletionTimestamp != nil)
}

// loseQuorum loses a majority of tg's members for good: their etcd
// paused (so no membership change happens between the deletions), then
// their Pods deleted, and their claims with them. The operator, armed to
// recover automatically, rebuilds the cluster from the most advanced
// survivor; check then allows what a rebuild may lose. Once a campaign
// for each cluster.
func loseQuorum(rng *rand.Rand) func(context.Context, *target) (string, error) {
	choice := rng.Int()
	return func(ctx context.Context, tg *target) (string, error) {
		if tg.lossTo != 0 {
			return "", errors.New("it lost a majority once already in this campaign")
		}
		pods := memberPods(ctx, tg)
		if len(pods) < 3 {
			return "", fmt.Errorf("%d member Pods: a survivor and a majority to lose take three", len(pods))
		}
		var gone []string
		for i := range etcdv1alpha1.Quorum(len(pods)) {
			gone = append(gone, pods[(choice+i)%len(pods)].Name)
		}
		what := "paused and deleted " + strings.Join(gone, ", ")
		if tg.claims {
			what += " with their claims"
		}
		tg.lossFrom = tg.hist.Now()
		defer func() { tg.lossTo = tg.hist.Now() }()
		for _, name := range gone {
			if err := env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultPause, Namespace: tg.key.Namespace, Pod: name, Container: builder.EtcdContainerName}); err != nil {
				return what, err
			}
		}
		for _, name := range gone {
			if err := k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: name}}, client.GracePeriodSeconds(0)); err != nil {
				return what, err
			}
			if tg.claims {
				claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: builder.ClaimName(name)}}
				if err := k8sClient.Delete(ctx, claim); err != nil {
					return what, err
				}
			}
		}
		return what, nil
	}
}

// stopNode stops the node of a random member for 20 s; never the node of
// the operator or cert-manager, which every cluster needs.
func stopNode(rng *rand.Rand) func(context.Context, *target) (string, error) {
	choice := rng.Int()
	return func(ctx context.Context, tg *target) (string, error) {
		busy := map[string]bool{}
		for _, ns := range []string{"etcd-operator-system", "cert-manager"} {
			pods := &corev1.PodList{}
			if err := k8sClient.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return "", err
			}
			for _, p := range pods.Items {
				busy[p.Spec.NodeName] = true
			}
		}
		var nodes []string
		for _, p := range memberPods(ctx, tg) {
			if n := p.Spec.NodeName; n != "" && !busy[n] && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			return "", errors.New("every member shares a node with the operator or cert-manager")
		}
		node := nodes[choice%len(nodes)]
		if err := env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultStopNode, Node: node}); err != nil {
			return node, err
		}
		time.Sleep(20 * time.Second)
		return node, env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultStartNode, Node: node})
	}
}

// request asks the operator for something through an annotation of
// the cluster, as kubectl etcd does, with the value value picks among its
// member Pods; the checks after the step see it carried out or waiting.
func request(annotation string, value func([]corev1.Pod) string) func(context.Context, *target) (string, error) {
	return func(ctx context.Context, tg *target) (string, error) {
		pods := memberPods(ctx, tg)
		if len(pods) == 0 {
			return "", errors.New("no member Pod")
		}
		v := value(pods)
		what := annotation + "=" + v
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotation, v)
		return what, k8sClient.Patch(ctx, &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: tg.key.Name}}, client.RawPatch(types.MergePatchType, patch))
	}
}

func killOperator(ctx context.Context, _ *target) (string, error) {
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace("etcd-operator-system")); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && len(p.Spec.Containers) > 0 {
			return p.Name, env.Faults.Inject(ctx, localcluster.Fault{Action: localcluster.FaultKill, Namespace: p.Namespace, Pod: p.Name, Container: p.Spec.Containers[0].Name})
		}
	}
	return "", errors.New("no operator Pod")
}

// refusePods makes the API server refuse every new Pod in the cluster's
// namespace for 20 s (a quota of the Pods there are).
func refusePods(ctx context.Context, tg *target) (string, error) {
	n := len(memberPods(ctx, tg))
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: tg.key.Namespace, Name: "chaos-no-more-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(n), resource.DecimalSI)}}}
	what := fmt.Sprintf("a quota of %d Pods", n)
	if err := k8sClient.Create(ctx, quota); err != nil {
		return what, err
	}
	time.Sleep(20 * time.Second)
	return what, k8sClient.Delete(ctx, quota)
}

func memberPods(ctx context.Context, tg *target) []corev1.Pod {
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(tg.key.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: tg.key.Name}); err != nil {
		return nil
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil || p.Status.PodIP == "" })
}

// sampler asks every member, a second after its last look, for a
// linearizable read, and the cluster for its member list, to judge the
// operator's removals and in-place rolls afterwards.
type sampler struct {
	target  *target
	mu      sync.Mutex
	samples []sample
	clients map[string]*clientv3.Client // by Pod IP
	// lostForGood are the QuorumAvailable messages seen with reason
	// QuorumLostForGood: no step loses a majority's data, so any is a
	// quorum that would come back reported as gone.
	lostForGood []string
}

// healthReadTimeout is how long a member's linearizable read may take in
// a sample for the member to count in the quorum. A member that answers
// late is slow, not gone: it acks the leader's appends, which is what a
// quorum is. With 1 s, seed 1 failed on 2026-12-07 on a machine running
// three local clusters and a compile: a removal of an outdated member of
// `two` (its volume just filled) was flagged because one of the two
// others, promoted 5 s before, did not answer within 1 s, before and
// after; the removal itself had committed, and that needed both others'
// acks, or the removed member's and one other's. The operator judges
// health with the same read, within the etcd client's call timeout (5 s).
// A member paused, cut or stopped still times out.
const healthReadTimeout = 3 * time.Second

// sampleWindow is how far from an event the samples that judge it may
// start: a look takes up to a second for the member list and
// healthReadTimeout for the reads, and looks are a second apart.
const sampleWindow = time.Second + time.Second + healthReadTimeout

// sample is one look: the voters and learners by name, and which members
// answered a linearizable read.
type sample struct {
	at       time.Time
	voters   []string
	learners []string
	healthy  map[string]bool
}

func (s *sampler) run(ctx context.Context) {
	s.clients = map[string]*clientv3.Client{}
	defer func() {
		for _, c := range s.clients {
			_ = c.Close()
		}
	}()
	for ctx.Err() == nil {
		s.lookAtQuorum(ctx)
		if smp, ok := s.look(ctx); ok {
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
		time.Sleep(time.Second)
	}
}

// lookAtQuorum notes the cluster's QuorumAvailable condition when it says
// the quorum is lost for good.
func (s *sampler) lookAtQuorum(ctx context.Context) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, s.target.key, c); err != nil {
		return
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumAvailable); cond != nil && cond.Reason == etcdv1alpha1.ReasonQuorumLostForGood {
		s.mu.Lock()
		s.lostForGood = append(s.lostForGood, time.Now().Format(time.RFC3339)+": "+cond.Message)
		s.mu.Unlock()
	}
}

// quorumsLostForGood are the messages lookAtQuorum noted.
func (s *sampler) quorumsLostForGood() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lostForGood)
}

func (s *sampler) look(ctx context.Context) (sample, bool) {
	tg := s.target
	smp := sample{at: time.Now(), healthy: map[string]bool{}}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	list, err := tg.cli.MemberList(cctx, clientv3.WithSerializable())
	cancel()
	if err != nil {
		return smp, false
	}
	for _, m := range list.Members {
		if m.IsLearner {
			smp.learners = append(smp.learners, m.Name)
		} else {
			smp.voters = append(smp.voters, m.Name)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range memberPods(ctx, tg) {
		cli, ok := s.clients[p.Status.PodIP]
		if !ok {
			var err error
			if cli, err = newClient(net.JoinHostPort(p.Status.PodIP, "2379"), p.Name+"."+tg.key.Name+"-headless."+tg.key.Namespace+".svc", tg.tls); err != nil {
				continue
			}
			s.clients[p.Status.PodIP] = cli
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, healthReadTimeout)
			defer cancel()
			_, err := cli.Get(cctx, "/chaos/health")
			mu.Lock()
			smp.healthy[p.Name] = err == nil
			mu.Unlock()
		})
	}
	wg.Wait()
	return smp, true
}

// last is the latest sample.
func (s *sampler) last() (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

var (
	removedMember = regexp.MustCompile(`^Removed member (\S+)`)
	rolledMember  = regexp.MustCompile(`^Deleted Pod (\S+) to rebuild it`)
)

// violations lists the removals and in-place rolls the operator made
// while the other voters were no quorum without the member: by the
// samples just before and just after (both must show it, so a fault that
// strikes between a look and the step is not counted).
func (s *sampler) violations(ctx context.Context, tg *target) []string {
	events := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, events, client.InNamespace(tg.key.Namespace)); err != nil {
		return []string{"listing events: " + err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range events.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.DeprecatedFirstTimestamp.Time
		}
		var member string
		stays := false
		if m := removedMember.FindStringSubmatch(e.Note); e.Reason == "MemberRemoved" && m != nil {
			member = m[1]
		} else if m := rolledMember.FindStringSubmatch(e.Note); e.Reason == "MemberRolling" && m != nil {
			member, stays = m[1], true
		} else {
			continue
		}
		before, after, ok := s.around(at)
		if !ok || slices.Contains(before.learners, member) || !slices.Contains(before.voters, member) {
			continue
		}
		need := etcdv1alpha1.Quorum(len(before.voters) - 1)
		if stays {
			need = etcdv1alpha1.Quorum(len(before.voters))
		}
		if b, a := othersHealthy(before, member), othersHealthy(after, member); b < need && a < need {
			out = append(out, fmt.Sprintf("%s %s at %s while %d (then %d) other voters of %d were healthy, below the %d it needs",
				e.Reason, member, at.Format(time.RFC3339), b, a, len(before.voters), need))
		}
	}
	return out
}

// around finds the last sample that started at most sampleWindow before
// at and the first that started at most sampleWindow after.
func (s *sampler) around(at time.Time) (before, after sample, ok bool) {
	var b, a *sample
	for i := range s.samples {
		smp := &s.samples[i]
		if !smp.at.After(at) && at.Sub(smp.at) <= sampleWindow {
			b = smp
		}
		if smp.at.After(at) && smp.at.Sub(at) <= sampleWindow && a == nil {
			a = smp
		}
	}
	if b == nil || a == nil {
		return sample{}, sample{}, false
	}
	return *b, *a, true
}

func othersHealthy(s sample, member string) int {
	n := 0
	for _, v := range s.voters {
		if v != member && s.healthy[v] {
			n++
		}
	}
	return n
}
