package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// clusterWith is a cluster in namespace ns whose status has conds.
func clusterWith(ns, name string, conds ...metav1.Condition) etcdv1alpha1.EtcdCluster {
	c := etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Status.Conditions = conds
	return c
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func TestChangeInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{"new cluster, no status yet", nil, ""},
		{"stable", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, "Membership matches spec.replicas")}, ""},
		{"roll", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "Roll", "Roll a-1: rolling a-1 to the current spec")}, "Roll a-1: rolling a-1 to the current spec"},
		{"membership change", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "AddLearner", "AddLearner a-2: 2 of 3 members")}, "AddLearner a-2: 2 of 3 members"},
		{"step without a message", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "Remove", "")}, "Remove"},
		{"paused mid-roll: no step is taken", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused, "it would now: Roll")}, ""},
		{"refused spec: no step is taken", []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonUpgradeRefused, "3.4 to 3.6")}, ""},
		{"CA rotation", []metav1.Condition{
			cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, ""),
			cond(etcdv1alpha1.ConditionCATrusted, metav1.ConditionFalse, etcdv1alpha1.ReasonRollingOut, "a-2 does not trust the new CA"),
		}, "CA rotation: a-2 does not trust the new CA"},
		{"CA trusted", []metav1.Condition{cond(etcdv1alpha1.ConditionCATrusted, metav1.ConditionTrue, etcdv1alpha1.ReasonAllMembersTrust, "")}, ""},
		{"recovery running", []metav1.Condition{cond(etcdv1alpha1.ConditionRecovered, metav1.ConditionUnknown, etcdv1alpha1.ReasonRecovering, "rebuilding from a-0")}, "recovery: rebuilding from a-0"},
		{"recovery done", []metav1.Condition{cond(etcdv1alpha1.ConditionRecovered, metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveredFromSurvivor, "")}, ""},
		{"recovery not approved", []metav1.Condition{cond(etcdv1alpha1.ConditionRecovered, metav1.ConditionFalse, etcdv1alpha1.ReasonStalePlan, "")}, ""},
		{"restore running", []metav1.Condition{cond(etcdv1alpha1.ConditionRestored, metav1.ConditionUnknown, etcdv1alpha1.ReasonRestoring, "the seed restores")}, "restore: the seed restores"},
		{"restore refused", []metav1.Condition{cond(etcdv1alpha1.ConditionRestored, metav1.ConditionFalse, etcdv1alpha1.ReasonSourceNotFound, "")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterWith("ns", "a", tc.conds...)
			if got := changeInFlight(&c); got != tc.want {
				t.Errorf("changeInFlight = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUpgradeableNamesTheChangingClusters(t *testing.T) {
	rolling := cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "Roll", "Roll: rolling")
	stable := cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, "")

	if got := upgradeable(nil); got.Status != metav1.ConditionTrue || got.Reason != ReasonNoClusterChanging {
		t.Errorf("no clusters: %+v, want True", got)
	}
	if got := upgradeable([]etcdv1alpha1.EtcdCluster{clusterWith("a", "x", stable)}); got.Status != metav1.ConditionTrue {
		t.Errorf("one stable cluster: %+v, want True", got)
	}

	clusters := []etcdv1alpha1.EtcdCluster{clusterWith("z", "stable", stable)}
	for i := 6; i >= 0; i-- {
		clusters = append(clusters, clusterWith(fmt.Sprintf("ns%d", i), "c", rolling))
	}
	got := upgradeable(clusters)
	if got.Status != metav1.ConditionFalse || got.Reason != ReasonClustersChanging {
		t.Fatalf("seven rolling clusters: %+v, want False/%s", got, ReasonClustersChanging)
	}
	want := "An upgrade waits for the changes in flight to end: ns0/c (Roll: rolling); ns1/c (Roll: rolling); ns2/c (Roll: rolling); ns3/c (Roll: rolling); ns4/c (Roll: rolling); and 2 more"
	if got.Message != want {
		t.Errorf("message\n got: %s\nwant: %s", got.Message, want)
	}
	if strings.Contains(got.Message, "stable") {
		t.Errorf("message names a stable cluster: %s", got.Message)
	}
}

// recordedCondition is the Upgradeable condition of an OperatorCondition,
// kept in memory; it counts its writes.
type recordedCondition struct {
	cond   *metav1.Condition
	writes int
}

func (r *recordedCondition) Get(context.Context) (*metav1.Condition, error) {
	if r.cond == nil {
		return nil, errors.New("conditionType Upgradeable not found")
	}
	c := *r.cond
	return &c, nil
}

func (r *recordedCondition) Set(_ context.Context, status metav1.ConditionStatus, opts ...conditions.Option) error {
	c := metav1.Condition{Type: "Upgradeable", Status: status}
	for _, o := range opts {
		o(&c)
	}
	r.cond, r.writes = &c, r.writes+1
	return nil
}

func TestUpgradeableReconcilerWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	rolling := clusterWith("ns", "rolling", cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "Roll", "Roll: rolling rolling-1"))
	c := fake.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(&rolling).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
	recorded := &recordedCondition{}
	r := &UpgradeableReconciler{Client: c, Condition: recorded}
	reconcileOnce := func() {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{})
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if res.RequeueAfter != upgradeableRecheck {
			t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, upgradeableRecheck)
		}
	}

	reconcileOnce()
	if recorded.cond == nil || recorded.cond.Status != metav1.ConditionFalse || !strings.Contains(recorded.cond.Message, "ns/rolling (Roll: rolling rolling-1)") {
		t.Fatalf("during a roll: %+v, want False naming ns/rolling", recorded.cond)
	}
	reconcileOnce()
	if recorded.writes != 1 {
		t.Errorf("%d writes after two passes over the same clusters, want 1", recorded.writes)
	}

	rolling.Status.Conditions = []metav1.Condition{cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, "")}
	if err := c.Status().Update(ctx, &rolling); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if recorded.cond.Status != metav1.ConditionTrue || recorded.cond.Reason != ReasonNoClusterChanging || recorded.writes != 2 {
		t.Errorf("after the roll: %+v (%d writes), want True/%s", recorded.cond, recorded.writes, ReasonNoClusterChanging)
	}
}
