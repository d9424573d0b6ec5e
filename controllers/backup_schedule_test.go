package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDueRun(t *testing.T) {
	for _, tc := range []struct {
		name, schedule, tz, last, now, due, next string
	}{
		{"nothing due yet", "0 * * * *", "", "2026-12-02T10:00:00Z", "2026-12-02T10:59:59Z", "", "2026-12-02T11:00:00Z"},
		{"due on the minute", "0 * * * *", "", "2026-12-02T10:00:00Z", "2026-12-02T11:00:00Z", "2026-12-02T11:00:00Z", "2026-12-02T12:00:00Z"},
		{"missed runs: only the latest", "*/5 * * * *", "", "2026-12-02T10:00:00Z", "2026-12-02T10:27:00Z", "2026-12-02T10:25:00Z", "2026-12-02T10:30:00Z"},
		{"down for a week: within a day", "@hourly", "", "2026-11-20T10:00:00Z", "2026-12-02T10:30:00Z", "2026-12-02T10:00:00Z", "2026-12-02T11:00:00Z"},
		{"a time zone", "0 2 * * *", "Europe/Berlin", "2026-12-01T02:00:00+01:00", "2026-12-02T01:30:00Z", "2026-12-02T01:00:00Z", "2026-12-03T01:00:00Z"},
		{"never fires", "0 0 30 2 *", "", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "", "0001-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &etcdv1alpha1.EtcdBackupSchedule{Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: tc.schedule}}
			if tc.tz != "" {
				s.Spec.TimeZone = ptr.To(tc.tz)
			}
			sched, err := parseSchedule(s)
			if err != nil {
				t.Fatal(err)
			}
			due, next := dueRun(sched, mustTime(t, tc.last), mustTime(t, tc.now))
			if tc.due == "" && !due.IsZero() || tc.due != "" && !due.Equal(mustTime(t, tc.due)) || !next.Equal(mustTime(t, tc.next)) {
				t.Errorf("dueRun = %s, %s; want %q, %s", due, next, tc.due, tc.next)
			}
		})
	}
	for _, tc := range []struct{ schedule, tz, want string }{
		{"61 * * * *", "", "spec.schedule: \"61 * * * *\": end of range (61) above maximum (59)"},
		{"* * * *", "", "spec.schedule: \"* * * *\": expected exactly 5 fields"},
		{"@every 1h", "Mars/Olympus", "spec.timeZone: \"Mars/Olympus\" is not an IANA time zone"},
	} {
		s := &etcdv1alpha1.EtcdBackupSchedule{Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: tc.schedule}}
		if tc.tz != "" {
			s.Spec.TimeZone = ptr.To(tc.tz)
		}
		if _, err := parseSchedule(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseSchedule(%q, %q) = %v, want %q", tc.schedule, tc.tz, err, tc.want)
		}
	}
}

func TestBackupsToPrune(t *testing.T) {
	now := mustTime(t, "2026-12-02T12:00:00Z")
	backup := func(name, phase string, ago time.Duration) etcdv1alpha1.EtcdBackup {
		b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: etcdv1alpha1.EtcdBackupStatus{Phase: phase}}
		b.CreationTimestamp = metav1.NewTime(now.Add(-ago - time.Minute))
		if phase == etcdv1alpha1.BackupSucceeded || phase == etcdv1alpha1.BackupFailed {
			b.Status.CompletionTime = &metav1.Time{Time: now.Add(-ago)}
		}
		return b
	}
	ok, failed, running := etcdv1alpha1.BackupSucceeded, etcdv1alpha1.BackupFailed, etcdv1alpha1.BackupRunning
	backups := []etcdv1alpha1.EtcdBackup{
		backup("s1", ok, 5*time.Hour), backup("s2", ok, 4*time.Hour), backup("s3", ok, 3*time.Hour),
		backup("s4", ok, 2*time.Hour), backup("s5", ok, time.Hour), backup("r", running, 0),
		backup("f1", failed, 5*time.Hour), backup("f2", failed, 4*time.Hour), backup("f3", failed, 3*time.Hour), backup("f4", failed, 2*time.Hour),
	}
	for _, tc := range []struct {
		name      string
		r         etcdv1alpha1.BackupRetention
		protected []string
		want      []string
	}{
		{"no retention: only failed beyond 3", etcdv1alpha1.BackupRetention{}, nil, []string{"f1"}},
		{"keep 3", etcdv1alpha1.BackupRetention{KeepLast: ptr.To[int32](3)}, nil, []string{"f1", "s1", "s2"}},
		{"keep 3, one is being restored", etcdv1alpha1.BackupRetention{KeepLast: ptr.To[int32](3)}, []string{"s1"}, []string{"f1", "s2"}},
		{"older than 150m", etcdv1alpha1.BackupRetention{MaxAge: &metav1.Duration{Duration: 150 * time.Minute}}, nil, []string{"f1", "s1", "s2", "s3"}},
		{"all too old: the newest success stays", etcdv1alpha1.BackupRetention{MaxAge: &metav1.Duration{Duration: time.Minute}, FailedToKeep: ptr.To[int32](0)}, nil,
			[]string{"f1", "f2", "f3", "f4", "s1", "s2", "s3", "s4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			protected := map[string]bool{}
			for _, p := range tc.protected {
				protected[p] = true
			}
			if got := backupsToPrune(backups, tc.r, now, protected); !slices.Equal(got, tc.want) {
				t.Errorf("prune %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBackupScheduleRuns drives a schedule every minute with keepLast 2
// pass by pass with its own clock, playing the backups' outcome: a backup
// per scheduled minute, none while one runs, and only the two newest
// successes kept.
func TestBackupScheduleRuns(t *testing.T) {
	ctx := context.Background()
	f := newBackupFixture(t)
	s := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "minutely"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Schedule: "* * * * *", Retention: etcdv1alpha1.BackupRetention{KeepLast: ptr.To[int32](2)},
			Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeDestination{ClaimName: "backups"}}},
	}
	f.create(s)
	created := s.CreationTimestamp.Time
	r := &BackupScheduleReconciler{Client: k8sClient, Now: func() time.Time { return f.now }}
	pass := func() *etcdv1alpha1.EtcdBackupSchedule {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
			t.Fatal(err)
		}
		got := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	backups := func() []etcdv1alpha1.EtcdBackup {
		t.Helper()
		list := &etcdv1alpha1.EtcdBackupList{}
		if err := k8sClient.List(ctx, list, client.InNamespace(f.ns), client.MatchingLabels{etcdv1alpha1.LabelBackupSchedule: "minutely"}); err != nil {
			t.Fatal(err)
		}
		var live []etcdv1alpha1.EtcdBackup
		for _, b := range list.Items {
			if b.DeletionTimestamp.IsZero() {
				live = append(live, b)
			}
		}
		return live
	}
	finish := func(name, phase string) {
		t.Helper()
		b := &etcdv1alpha1.EtcdBackup{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, b); err != nil {
			t.Fatal(err)
		}
		b.Status.Phase, b.Status.CompletionTime = phase, &metav1.Time{Time: f.now}
		if err := k8sClient.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}

	f.now = created.Truncate(time.Minute).Add(time.Minute + 5*time.Second)
	got := pass()
	first := scheduledBackupName(s, f.now.Truncate(time.Minute))
	if bs := backups(); len(bs) != 1 || bs[0].Name != first || bs[0].Spec.DeletionPolicy != etcdv1alpha1.BackupDelete || len(bs[0].OwnerReferences) != 0 {
		t.Fatalf("after the first minute: %+v", bs)
	}
	if got.Status.ActiveBackup != first || !meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.ConditionScheduleReady) {
		t.Errorf("status %+v", got.Status)
	}
	// The next minute while the first still waits to start (Pending): it
	// gives way to the new run.
	f.now = f.now.Add(time.Minute)
	pass()
	bs := backups()
	if len(bs) != 1 || bs[0].Name == first {
		t.Fatalf("a Pending backup did not give way to the next run: %v", bs)
	}
	// The next minute while that one runs: skipped.
	setPhase := func(name, phase string) {
		t.Helper()
		b := &etcdv1alpha1.EtcdBackup{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, b); err != nil {
			t.Fatal(err)
		}
		b.Status.Phase = phase
		if err := k8sClient.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	setPhase(bs[0].Name, etcdv1alpha1.BackupRunning)
	f.now = f.now.Add(time.Minute)
	pass()
	if again := backups(); len(again) != 1 || again[0].Name != bs[0].Name {
		t.Fatalf("a second backup started while the first ran: %v", again)
	}
	// Four more minutes, each backup succeeding before the next.
	for range 4 {
		finish(backups()[len(backups())-1].Name, etcdv1alpha1.BackupSucceeded)
		f.now = f.now.Add(time.Minute)
		pass()
	}
	finish(backups()[len(backups())-1].Name, etcdv1alpha1.BackupSucceeded)
	got = pass()
	bs = backups()
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	if len(bs) != 2 {
		t.Errorf("backups kept: %v; want the 2 newest", names)
	}
	if got.Status.LastBackup != bs[len(bs)-1].Name || got.Status.LastSuccessfulTime == nil {
		t.Errorf("status %+v; backups %v", got.Status, names)
	}
}
