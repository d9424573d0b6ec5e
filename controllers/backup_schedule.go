package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// parseSchedule parses spec.schedule in spec.timeZone as a CronJob does
// (robfig/cron's ParseStandard: five fields or a macro).
func parseSchedule(s *etcdv1alpha1.EtcdBackupSchedule) (cron.Schedule, error) {
	spec := s.Spec.Schedule
	if tz := s.Spec.TimeZone; tz != nil && *tz != "" {
		if _, err := time.LoadLocation(*tz); err != nil {
			return nil, fmt.Errorf("spec.timeZone: %q is not an IANA time zone such as Europe/Berlin: %w", *tz, err)
		}
		spec = "CRON_TZ=" + *tz + " " + spec
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("spec.schedule: %q: %w", s.Spec.Schedule, err)
	}
	return sched, nil
}

// catchUpWindow bounds how far back missed runs are looked for: an
// operator that was down for a week does not walk every minute of it.
const catchUpWindow = 24 * time.Hour

// dueRun is the scheduled time to run at now, if any (zero when none is
// due), and the next scheduled time after now. Of the runs missed since
// last (the last run's scheduled time; the schedule's creation before its
// first), only the latest is due: a schedule that was suspended, or whose
// operator was down, takes one backup when it can, not one per missed
// run.
func dueRun(sched cron.Schedule, last, now time.Time) (due, next time.Time) {
	from := last
	if earliest := now.Add(-catchUpWindow); from.Before(earliest) {
		from = earliest
	}
	// A schedule that never fires (30 February) has zero times.
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		due = t
	}
	return due, sched.Next(now)
}

// scheduledBackupName is the name of the backup of schedule s at
// scheduled time t: the same after a crash, so a second create of it
// finds it exists.
func scheduledBackupName(s *etcdv1alpha1.EtcdBackupSchedule, t time.Time) string {
	return s.Name + "-" + strconv.FormatInt(t.Unix()/60, 10)
}

// backupsToPrune are the names of the backups retention r deletes at now:
// successful ones beyond the keepLast newest or completed longer than
// maxAge ago, but never the newest success; failed ones beyond the
// failedToKeep newest (default 3). Running backups, and those a cluster
// being restored reads (protected), are kept.
func backupsToPrune(backups []etcdv1alpha1.EtcdBackup, r etcdv1alpha1.BackupRetention, now time.Time, protected map[string]bool) []string {
	var succeeded, failed []etcdv1alpha1.EtcdBackup
	for _, b := range backups {
		switch b.Status.Phase {
		case etcdv1alpha1.BackupSucceeded:
			succeeded = append(succeeded, b)
		case etcdv1alpha1.BackupFailed:
			failed = append(failed, b)
		}
	}
	newestFirst := func(a, b etcdv1alpha1.EtcdBackup) int {
		return cmp.Or(completion(b).Compare(completion(a)), cmp.Compare(b.Name, a.Name))
	}
	slices.SortFunc(succeeded, newestFirst)
	slices.SortFunc(failed, newestFirst)
	var prune []string
	for i, b := range succeeded {
		if i == 0 || protected[b.Name] {
			continue
		}
		tooMany := r.KeepLast != nil && i >= int(*r.KeepLast)
		tooOld := r.MaxAge != nil && now.Sub(completion(b)) > r.MaxAge.Duration
		if tooMany || tooOld {
			prune = append(prune, b.Name)
		}
	}
	keepFailed := 3
	if r.FailedToKeep != nil {
		keepFailed = int(*r.FailedToKeep)
	}
	for i, b := range failed {
		if i >= keepFailed && !protected[b.Name] {
			prune = append(prune, b.Name)
		}
	}
	slices.Sort(prune)
	return prune
}

// completion is when a backup ended; its creation when it has no
// completion time.
func completion(b etcdv1alpha1.EtcdBackup) time.Time {
	if b.Status.CompletionTime != nil {
		return b.Status.CompletionTime.Time
	}
	return b.CreationTimestamp.Time
}
