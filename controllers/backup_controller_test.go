package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// backupFixture is a formed cluster (paused, so the suite's topology
// reconciler leaves it alone) with one member Pod, and a backup reconciler
// driven pass by pass with a clock of its own. envtest runs no Pods: the
// test plays the runner by writing its Pod's status.
type backupFixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	now time.Time
	r   *BackupReconciler
	// events holds what the reconciler recorded, oldest first.
	events *events.FakeRecorder
}

func newBackupFixture(t *testing.T) *backupFixture {
	ctx := context.Background()
	f := &backupFixture{t: t, ctx: ctx, ns: newNamespace(ctx, t), now: time.Now(), events: &events.FakeRecorder{Events: make(chan string, 100)}}
	f.r = &BackupReconciler{Client: k8sClient, Pods: k8sClient, Recorder: f.events, Image: "ghcr.io/etcd-operator/etcd-operator:v0.1.0", Now: func() time.Time { return f.now }}
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db", Annotations: map[string]string{etcdv1alpha1.AnnotationPaused: "true"}},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: new(int32(1))},
	}
	f.create(c)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		c.Status.ClusterID = "c1"
		c.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "db-0", DBSize: 100 << 20}}
		return k8sClient.Status().Update(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	member := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db-0", Labels: builder.MemberSelectorLabels(c),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
	}
	f.create(member)
	return f
}

// lastEvent is the newest event recorded since the last call ("" if none).
func (f *backupFixture) lastEvent() string {
	last := ""
	for {
		select {
		case e := <-f.events.Events:
			last = e
		default:
			return last
		}
	}
}

func (f *backupFixture) create(obj client.Object) {
	f.t.Helper()
	if err := k8sClient.Create(f.ctx, obj); err != nil {
		f.t.Fatal(err)
	}
}

func (f *backupFixture) s3Backup(name string, backoffLimit int32) *etcdv1alpha1.EtcdBackup {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", BackoffLimit: &backoffLimit, Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
			Endpoint: "https://s3.example", Bucket: "bkp", Prefix: "etcd", CredentialsSecret: etcdv1alpha1.LocalObjectReference{Name: "s3"},
		}}},
	}
	f.create(b)
	return b
}

// pass runs one reconcile and returns the backup as it is after it.
func (f *backupFixture) pass(b *etcdv1alpha1.EtcdBackup) (ctrl.Result, *etcdv1alpha1.EtcdBackup) {
	f.t.Helper()
	res, err := f.r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	if err != nil {
		f.t.Fatalf("Reconcile: %v", err)
	}
	got := &etcdv1alpha1.EtcdBackup{}
	if err := k8sClient.Get(f.ctx, client.ObjectKeyFromObject(b), got); err != nil {
		f.t.Fatal(err)
	}
	return res, got
}

func (f *backupFixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{}
	err := k8sClient.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, p)
	if apierrors.IsNotFound(err) || err == nil && !p.DeletionTimestamp.IsZero() {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// finish ends the runner Pod name as the kubelet would, with message as
// its termination message.
func (f *backupFixture) finish(name string, exitCode int32, message string) {
	f.t.Helper()
	p := f.pod(name)
	if p == nil {
		f.t.Fatalf("no Pod %s", name)
	}
	p.Status.Phase = corev1.PodSucceeded
	if exitCode != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "backup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message}}}}
	if err := k8sClient.Status().Update(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
}

func resultJSON(t *testing.T, r backup.Result) string {
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func condition(b *etcdv1alpha1.EtcdBackup) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionBackupSucceeded); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestBackupAttempts follows a backup from a missing Secret through a
// failed attempt, its back-off and a successful retry.
func TestBackupAttempts(t *testing.T) {
	f := newBackupFixture(t)
	b := f.s3Backup("nightly", 4)

	// The credentials Secret is missing: Pending, no Pod, no attempt used.
	_, got := f.pass(b)
	if c := condition(got); got.Status.Phase != etcdv1alpha1.BackupPending || c.Reason != reasonSecretNotFound || !strings.HasPrefix(c.Message, "spec.destination.s3.credentialsSecret.name: Secret s3 not found") || got.Status.Attempts != 0 {
		t.Fatalf("without the Secret: phase %s, attempts %d, condition %+v", got.Status.Phase, got.Status.Attempts, c)
	}
	if f.pod("nightly-attempt-1") != nil {
		t.Fatal("a runner started without its Secret")
	}
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "s3"}, Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("a"), "AWS_SECRET_ACCESS_KEY": []byte("s")}})

	// Attempt 1 starts.
	_, got = f.pass(b)
	if got.Status.Phase != etcdv1alpha1.BackupRunning || got.Status.Attempts != 1 || got.Status.StartTime == nil {
		t.Fatalf("after the Secret: %+v", got.Status)
	}
	runner := f.pod("nightly-attempt-1")
	if runner == nil {
		t.Fatal("no runner Pod nightly-attempt-1")
	}
	if _, ok := runner.Labels[etcdv1alpha1.LabelCluster]; ok {
		t.Error("the runner carries the cluster label, which the cluster's Services and PodDisruptionBudget select")
	}
	args := strings.Join(runner.Spec.Containers[0].Args, " ")
	for _, want := range []string{"backup run", "--key=etcd/" + f.ns + "/db/nightly.db", "--endpoints=http://db-0.db-headless." + f.ns + ".svc:2379", "--s3-bucket=bkp", "--backup-uid=" + string(got.UID)} {
		if !strings.Contains(args, want) {
			t.Errorf("runner args %q lack %q", args, want)
		}
	}
	if runner.Spec.RestartPolicy != corev1.RestartPolicyNever || runner.Spec.ActiveDeadlineSeconds == nil || *runner.Spec.ActiveDeadlineSeconds != 1800 {
		t.Errorf("runner restart policy %s, deadline %v", runner.Spec.RestartPolicy, runner.Spec.ActiveDeadlineSeconds)
	}

	// Another pass while it runs changes nothing.
	if _, again := f.pass(b); again.Status.Attempts != 1 || f.pod("nightly-attempt-2") != nil {
		t.Fatalf("a pass while attempt 1 runs: %+v", again.Status)
	}

	// Attempt 1 fails: Retrying, its Pod gone, attempt 2 after 10s.
	f.finish("nightly-attempt-1", 1, resultJSON(t, backup.Result{Reason: backup.ReasonEndpointFailed, Key: "etcd/" + f.ns + "/db/nightly.db", Message: "spec.destination.s3.endpoint: connection refused"}))
	res, got := f.pass(b)
	if c := condition(got); got.Status.Phase != etcdv1alpha1.BackupRetrying || c.Reason != backup.ReasonEndpointFailed || !strings.Contains(c.Message, "connection refused") {
		t.Fatalf("after a failed attempt: %+v", got.Status)
	}
	if res.RequeueAfter != 10*time.Second || got.Status.NextAttemptTime == nil {
		t.Errorf("requeue after %s, next attempt %v; want 10s", res.RequeueAfter, got.Status.NextAttemptTime)
	}
	if f.pod("nightly-attempt-1") == nil {
		t.Error("the failed runner's Pod is gone, and its log with it")
	}
	if e := f.lastEvent(); !strings.Contains(e, "kubectl logs nightly-attempt-1") {
		t.Errorf("event %q does not say where the log is", e)
	}
	if _, early := f.pass(b); early.Status.Attempts != 1 || f.pod("nightly-attempt-2") != nil {
		t.Fatal("attempt 2 started before its back-off")
	}
	f.now = f.now.Add(11 * time.Second)
	if _, got = f.pass(b); got.Status.Attempts != 2 || f.pod("nightly-attempt-2") == nil {
		t.Fatalf("attempt 2 did not start after its back-off: %+v", got.Status)
	}

	// Attempt 2 succeeds.
	ok := backup.Result{Reason: backup.ReasonVerified, Key: "etcd/" + f.ns + "/db/nightly.db", Facts: backup.Facts{Size: 4128, SHA256: "ab12", Revision: 77}, Location: "s3://bkp/etcd/" + f.ns + "/db/nightly.db", Member: "db-0", ClusterID: "c1", Version: "3.6.16"}
	f.finish("nightly-attempt-2", 0, resultJSON(t, ok))
	_, got = f.pass(b)
	s := got.Status
	if s.Phase != etcdv1alpha1.BackupSucceeded || s.Revision != 77 || s.Size != 4128 || s.SHA256 != "ab12" || s.Location != "s3://bkp/etcd/"+f.ns+"/db/nightly.db" || s.CompletionTime == nil || condition(got).Status != metav1.ConditionTrue {
		t.Fatalf("after a successful attempt: %+v", s)
	}
	f.pass(got)
	if f.pod("nightly-attempt-2") != nil || f.pod("nightly-attempt-1") != nil {
		t.Error("a runner's Pod is left after the backup succeeded")
	}
}

// TestBackupRefusesResultsItCannotTrust: a runner that exits without a
// result, or reports one for another key, or reports success with a
// failing exit code, is a failed attempt; with backoffLimit 0 the backup
// is then Failed for good.
func TestBackupRefusesResultsItCannotTrust(t *testing.T) {
	f := newBackupFixture(t)
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "s3"}, Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("a"), "AWS_SECRET_ACCESS_KEY": []byte("s")}})
	for _, tc := range []struct {
		name     string
		exitCode int32
		message  string
	}{
		{"no-result", 2, "panic: runtime error\ngoroutine 1 [running]"},
		{"other-key", 0, resultJSON(t, backup.Result{Reason: backup.ReasonVerified, Key: "etcd/other.db", Facts: backup.Facts{Size: 1, SHA256: "x", Revision: 1}})},
		{"success-exit-1", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := f.s3Backup(tc.name, 0)
			if _, got := f.pass(b); got.Status.Phase != etcdv1alpha1.BackupRunning {
				t.Fatalf("the backup did not start: %+v", got.Status)
			}
			message := tc.message
			if message == "" {
				message = resultJSON(t, backup.Result{Reason: backup.ReasonVerified, Key: b.SnapshotKey(), Facts: backup.Facts{Size: 1, SHA256: "x", Revision: 1}})
			}
			f.finish(tc.name+"-attempt-1", tc.exitCode, message)
			_, got := f.pass(b)
			if c := condition(got); got.Status.Phase != etcdv1alpha1.BackupFailed || c.Status != metav1.ConditionFalse || c.Reason != reasonRunnerFailed {
				t.Fatalf("phase %s, condition %+v; want Failed, %s", got.Status.Phase, c, reasonRunnerFailed)
			}
			if got.Status.SHA256 != "" || got.Status.Revision != 0 {
				t.Errorf("an untrusted result reached the status: %+v", got.Status)
			}
			if f.pass(got); f.pod(tc.name+"-attempt-1") == nil {
				t.Error("the Pod of the attempt the backup gave up on is gone, and its log with it")
			}
		})
	}
}

// TestBackupStartsTheRunnerOfARecordedAttempt: the operator stopped
// after recording attempt 1 and before creating its Pod. The next passes
// create that attempt's Pod, once, and start no other attempt.
func TestBackupStartsTheRunnerOfARecordedAttempt(t *testing.T) {
	f := newBackupFixture(t)
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "s3"}, Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("a"), "AWS_SECRET_ACCESS_KEY": []byte("s")}})
	b := f.s3Backup("crash", 4)
	b.Status.Attempts, b.Status.Phase = 1, etcdv1alpha1.BackupRunning
	if err := k8sClient.Status().Update(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, got := f.pass(b); got.Status.Attempts != 1 || got.Status.Phase != etcdv1alpha1.BackupRunning {
			t.Fatalf("status %+v; want attempt 1 Running", got.Status)
		}
	}
	pods := &corev1.PodList{}
	if err := k8sClient.List(f.ctx, pods, client.InNamespace(f.ns), client.MatchingLabels{builder.LabelBackup: "crash"}); err != nil {
		t.Fatal(err)
	}
	if names := podListNames(pods); !slices.Equal(names, []string{"crash-attempt-1"}) {
		t.Errorf("runner Pods %v; want only crash-attempt-1", names)
	}
}

func podListNames(pods *corev1.PodList) []string {
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestRunnerPodsRunToTheirOwnDeadline: an attempt is judged against
// spec.timeout, the Pod that removes the snapshot against its own.
func TestRunnerPodsRunToTheirOwnDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Timeout: &metav1.Duration{Duration: time.Minute}}}
	running := func(name string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	for _, tc := range []struct {
		pod       *corev1.Pod
		ended     bool
		mentioned string
	}{
		{running(builder.BackupPodName(b, 1), 80*time.Second), false, ""},
		{running(builder.BackupPodName(b, 1), 2*time.Minute), true, "spec.timeout: the attempt did not end within 60s"},
		{running(builder.DeleteBackupPodName(b), 2*time.Minute), false, ""},
		{running(builder.DeleteBackupPodName(b), 11*time.Minute), true, "the removal of the snapshot did not end within 600s"},
	} {
		res, ended := runnerResult(b, tc.pod, now)
		if ended != tc.ended || !strings.Contains(res.Message, tc.mentioned) {
			t.Errorf("%s created %s ago: ended %v, %q; want %v, %q", tc.pod.Name, now.Sub(tc.pod.CreationTimestamp.Time), ended, res.Message, tc.ended, tc.mentioned)
		}
	}
}
