package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// authSpec is a formed cluster whose spec asks for etcd authentication
// or not.
func authSpec(on bool) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ns", UID: "shared-uid", Generation: 4},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{EnableAuth: on}},
		Status:     etcdv1alpha1.EtcdClusterStatus{ClusterID: "c1"},
	}
}

func TestPlanAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    bool
		on      bool
		tenants []string
		want    authStep
	}{
		{"asked and off: on", true, false, nil, authEnable},
		{"asked and off, with tenants: on", true, false, []string{"t1"}, authEnable},
		{"asked and on", true, true, nil, authKeep},
		{"cleared and on: off", false, true, nil, authDisable},
		{"cleared and on, with tenants: kept on", false, true, []string{"t1", "t2"}, authKeep},
		{"cleared and off, with tenants: stays off", false, false, []string{"t1"}, authKeep},
		{"cleared and off", false, false, nil, authKeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := planAuth(authSpec(tt.spec), tt.on, tt.tenants); got != tt.want {
				t.Errorf("planAuth(enableAuth %v, on %v, tenants %v) = %s, want %s", tt.spec, tt.on, tt.tenants, got, tt.want)
			}
		})
	}
}

func TestAuthCondition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    bool
		on      bool
		tenants []string
		status  metav1.ConditionStatus
		reason  string
		says    []string
	}{
		{"on as asked", true, true, []string{"t1"}, metav1.ConditionTrue, etcdv1alpha1.ReasonEnabled, []string{"etcd authentication is on", "the password in Secret shared-root-password"}},
		{"off as asked", false, false, nil, metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, []string{"etcd authentication is off"}},
		{"off as asked, with refused tenants", false, false, []string{"t1"}, metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, []string{"etcd authentication is off"}},
		{
			"kept on for one tenant", false, true, []string{"t1"}, metav1.ConditionFalse, etcdv1alpha1.ReasonTenantsExist,
			[]string{"stays on although spec.security.enableAuth is false", "(EtcdTenant t1)", "delete the cluster's EtcdTenants first", "set spec.security.enableAuth: true"},
		},
		{
			"kept on for two", false, true, []string{"t1", "t2"}, metav1.ConditionFalse, etcdv1alpha1.ReasonTenantsExist,
			[]string{"every client could read and write the keys of this cluster's tenants (EtcdTenants t1, t2)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := authCondition(authSpec(tt.spec), tt.on, tt.tenants)
			if got.Type != etcdv1alpha1.ConditionAuthentication || got.Status != tt.status || got.Reason != tt.reason || got.ObservedGeneration != 4 {
				t.Errorf("authCondition() = %s %s %s (generation %d), want %s %s", got.Type, got.Status, got.Reason, got.ObservedGeneration, tt.status, tt.reason)
			}
			for _, s := range tt.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
		})
	}
}

// TestAuthenticationWithTenants runs the PKI reconciler's authentication
// step against a fake etcd: spec.security.enableAuth cleared turns etcd's
// authentication off only once no EtcdTenant (not even one being deleted)
// names the cluster, and says so in the condition and a Warning event.
func TestAuthenticationWithTenants(t *testing.T) {
	t.Parallel()
	deleting := tenant("t3", "shared", "", 0)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{etcdv1alpha1.FinalizerTenant}
	kept := authCondition(authSpec(false), true, []string{"t1", "t2"})
	tests := []struct {
		name    string
		spec    bool
		on      bool
		tenants []etcdv1alpha1.EtcdTenant
		// was is the Authentication condition an earlier pass wrote.
		was       *metav1.Condition
		wantOn    bool
		reason    string
		says      string
		event     string
		disableds int
	}{
		{
			name: "cleared with two tenants: kept on", on: true,
			tenants: []etcdv1alpha1.EtcdTenant{tenant("t2", "shared", "", 0), tenant("t1", "shared", "", time.Hour), tenant("x", "other", "", 0)},
			wantOn:  true, reason: etcdv1alpha1.ReasonTenantsExist, says: "(EtcdTenants t1, t2)",
			event: "Warning TenantsExist Refusing to turn etcd authentication off: etcd authentication stays on",
		},
		{
			name: "cleared with two tenants, already said: no second event", on: true,
			tenants: []etcdv1alpha1.EtcdTenant{tenant("t2", "shared", "", 0), tenant("t1", "shared", "", time.Hour)},
			was:     &kept, wantOn: true, reason: etcdv1alpha1.ReasonTenantsExist, says: "(EtcdTenants t1, t2)",
		},
		{
			name: "cleared with a tenant being deleted: kept on", on: true,
			tenants: []etcdv1alpha1.EtcdTenant{deleting},
			wantOn:  true, reason: etcdv1alpha1.ReasonTenantsExist, says: "(EtcdTenant t3)", event: "Warning TenantsExist",
		},
		{
			name: "cleared, the tenants gone: off", on: true, tenants: []etcdv1alpha1.EtcdTenant{tenant("x", "other", "", 0)},
			was: &kept, wantOn: false, reason: etcdv1alpha1.ReasonDisabled, says: "etcd authentication is off", event: "Normal AuthDisabled", disableds: 1,
		},
		{
			name: "cleared and off, with a tenant: stays off", on: false, tenants: []etcdv1alpha1.EtcdTenant{tenant("t1", "shared", "", 0)},
			wantOn: false, reason: etcdv1alpha1.ReasonDisabled, says: "etcd authentication is off",
		},
		{
			name: "asked, with a tenant: on", spec: true, on: false, tenants: []etcdv1alpha1.EtcdTenant{tenant("t1", "shared", "", 0)},
			wantOn: true, reason: etcdv1alpha1.ReasonEnabled, says: "etcd authentication is on", event: "Normal AuthEnabled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := authSpec(tt.spec)
			if tt.was != nil {
				c.Status.Conditions = []metav1.Condition{*tt.was}
			}
			member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "shared-0", Labels: builder.MemberSelectorLabels(c),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))},
			}}
			objs := []client.Object{c, member}
			for i := range tt.tenants {
				objs = append(objs, &tt.tenants[i])
			}
			etcdFake := fake.New()
			if tt.on {
				_ = etcdFake.EnableAuth(ctx, "")
			}
			recorder := &events.FakeRecorder{Events: make(chan string, 10)}
			r := &PKIReconciler{
				Client:   fakeclient.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(objs...).Build(),
				Recorder: recorder,
				NewEtcdClient: func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
					return unclosable{etcdFake}, nil
				},
			}
			cond, recheck, err := r.authentication(ctx, c)
			if err != nil || recheck != 0 {
				t.Fatalf("authentication() = %v, recheck %s", err, recheck)
			}
			if on, _ := etcdFake.AuthEnabled(ctx); on != tt.wantOn {
				t.Errorf("etcd authentication on = %v, want %v", on, tt.wantOn)
			}
			if n := len(etcdFake.CallsOf(fake.AuthOff)); n != tt.disableds {
				t.Errorf("DisableAuth called %d times, want %d", n, tt.disableds)
			}
			if cond.Reason != tt.reason || !strings.Contains(cond.Message, tt.says) {
				t.Errorf("Authentication = %s %q, want %s saying %q", cond.Reason, cond.Message, tt.reason, tt.says)
			}
			close(recorder.Events)
			var got []string
			for e := range recorder.Events {
				got = append(got, e)
			}
			switch {
			case tt.event == "" && len(got) > 0:
				t.Errorf("events %q, want none", got)
			case tt.event != "" && !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, tt.event) }):
				t.Errorf("events %q, want one starting %q", got, tt.event)
			}
		})
	}
}

// TestAuthenticationBeforeTheClusterForms checks the Authentication
// condition of a cluster that has not formed: one whose spec does not ask
// for authentication says it is off (a cluster the operator founds starts
// without it, and nothing turns it on), not Unknown; one that asks says
// it is turned on once the cluster forms. Neither asks etcd.
func TestAuthenticationBeforeTheClusterForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		security *etcdv1alpha1.SecuritySpec
		status   metav1.ConditionStatus
		reason   string
		says     string
	}{
		{"no security", nil, metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, "etcd authentication is off"},
		{"enableAuth false", &etcdv1alpha1.SecuritySpec{}, metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled, "etcd authentication is off"},
		{"enableAuth true", &etcdv1alpha1.SecuritySpec{EnableAuth: true}, metav1.ConditionUnknown, etcdv1alpha1.ReasonNotFormed, "turned on once the cluster has formed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := authSpec(false)
			c.Spec.Security, c.Status.ClusterID = tt.security, ""
			r := &PKIReconciler{
				Client: fakeclient.NewClientBuilder().WithScheme(support.Scheme()).WithObjects(c).Build(),
				NewEtcdClient: func(context.Context, *etcdv1alpha1.EtcdCluster, []string) (etcd.Client, error) {
					t.Error("etcd was asked before the cluster formed")
					return unclosable{fake.New()}, nil
				},
			}
			cond, recheck, err := r.authentication(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if cond.Status != tt.status || cond.Reason != tt.reason || !strings.Contains(cond.Message, tt.says) {
				t.Errorf("Authentication = %s %s %q, want %s %s saying %q", cond.Status, cond.Reason, cond.Message, tt.status, tt.reason, tt.says)
			}
			if recheck != 0 {
				t.Errorf("looks again after %s, want only when the cluster forms (a watched change)", recheck)
			}
		})
	}
}
