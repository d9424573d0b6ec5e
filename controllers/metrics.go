package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// The operator's metrics, served on the manager's metrics endpoint beside
// controller-runtime's own. Member series carry namespace, cluster and
// member labels; they are replaced on every probe, so removed members and
// deleted clusters leave no stale series.
var (
	memberLabels = []string{"namespace", "cluster", "member"}

	memberHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_healthy",
		Help: "1 when the member answered a linearizable read (serializable for a learner) at the last probe.",
	}, memberLabels)
	memberLeader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_leader",
		Help: "1 when the member is the leader.",
	}, memberLabels)
	memberLearner = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_learner",
		Help: "1 when the member is a learner.",
	}, memberLabels)
	memberDBSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_db_size_bytes",
		Help: "Size of the member's database file.",
	}, memberLabels)
	memberDBSizeInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_db_size_in_use_bytes",
		Help: "Part of the member's database holding live data.",
	}, memberLabels)
	memberAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_member_alarm",
		Help: "1 for each alarm (NOSPACE, CORRUPT) the member has raised.",
	}, append(memberLabels, "alarm"))
	clusterQuorum = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_cluster_quorum_available",
		Help: "1 when a quorum of voting members answers linearizable reads.",
	}, []string{"namespace", "cluster"})
	backupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_backup_last_success_timestamp_seconds",
		Help: "Completion time of the cluster's newest successful EtcdBackup (alert when it is older than your schedule allows).",
	}, []string{"namespace", "cluster"})
	backupLastSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_backup_last_size_bytes",
		Help: "Size of the snapshot of the cluster's newest successful EtcdBackup.",
	}, []string{"namespace", "cluster"})
	backupAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_backup_attempts_total",
		Help: "Ended backup attempts, by result (succeeded or failed).",
	}, []string{"namespace", "cluster", "result"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_reconcile_errors_total",
		Help: "Reconcile passes that failed, by cluster and reconciler.",
	}, []string{"namespace", "cluster", "controller"})
)

func init() {
	metrics.Registry.MustRegister(memberHealthy, memberLeader, memberLearner, memberDBSize, memberDBSizeInUse, memberAlarm, clusterQuorum, reconcileErrors, backupLastSuccess, backupLastSize, backupAttempts)
}

var memberGauges = []*prometheus.GaugeVec{memberHealthy, memberLeader, memberLearner, memberDBSize, memberDBSizeInUse, memberAlarm}

// recordHealth replaces the series of a cluster with what a probe found.
func recordHealth(namespace, cluster string, r healthReport, reachable bool) {
	forgetMembers(namespace, cluster)
	clusterQuorum.WithLabelValues(namespace, cluster).Set(boolValue(r.quorum))
	if !reachable {
		return
	}
	for _, m := range r.members {
		l := prometheus.Labels{"namespace": namespace, "cluster": cluster, "member": m.Name}
		memberHealthy.With(l).Set(boolValue(m.Healthy))
		memberLeader.With(l).Set(boolValue(m.Role == etcdv1alpha1.MemberRoleLeader))
		memberLearner.With(l).Set(boolValue(m.Role == etcdv1alpha1.MemberRoleLearner))
		memberDBSize.With(l).Set(float64(m.DBSize))
		memberDBSizeInUse.With(l).Set(float64(m.DBSizeInUse))
		for _, a := range m.Alarms {
			memberAlarm.WithLabelValues(namespace, cluster, m.Name, a).Set(1)
		}
	}
}

// forgetMembers drops the member series of a cluster.
func forgetMembers(namespace, cluster string) {
	l := prometheus.Labels{"namespace": namespace, "cluster": cluster}
	for _, g := range memberGauges {
		g.DeletePartialMatch(l)
	}
}

// forgetCluster drops every series of a deleted cluster.
func forgetCluster(namespace, cluster string) {
	forgetMembers(namespace, cluster)
	l := prometheus.Labels{"namespace": namespace, "cluster": cluster}
	clusterQuorum.DeletePartialMatch(l)
	reconcileErrors.DeletePartialMatch(l)
}

// countError counts a failed reconcile pass.
func countError(namespace, cluster, controller string, err error) {
	if err != nil {
		reconcileErrors.WithLabelValues(namespace, cluster, controller).Inc()
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
