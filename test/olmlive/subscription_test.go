package olmlive

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

const operatorNamespace = "etcd-operator"

// TestSubscriptionInstallsTheOperator: a Subscription to the alpha channel,
// in a namespace whose OperatorGroup targets every namespace, gets the
// operator installed by OLM (and cert-manager, which its bundle depends
// on, from the community catalog); an EtcdCluster in another namespace
// comes up Ready with real members; the operator keeps Upgradeable on its
// OperatorCondition: False while a cluster is changing, naming it, True
// once none is; and the next release, published in the catalog, is held
// while a roll is in progress and installed once it ends
// (upgradeWaitsForARoll).
func TestSubscriptionInstallsTheOperator(t *testing.T) {
	ctx := context.Background()
	create(ctx, t, &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: "olm"},
		Spec:       operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Image: *catalogImage, DisplayName: "etcd operator"},
	})
	support.Eventually(t, 3*time.Minute, "the catalog's registry to serve", func() error {
		cs := &operatorsv1alpha1.CatalogSource{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "olm", Name: "etcd-operator"}, cs); err != nil {
			return err
		}
		if cs.Status.GRPCConnectionState == nil || cs.Status.GRPCConnectionState.LastObservedState != "READY" {
			return fmt.Errorf("connection state: %+v", cs.Status.GRPCConnectionState)
		}
		return nil
	})

	create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})
	create(ctx, t, &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: operatorNamespace}})
	subscribed := time.Now()
	create(ctx, t, &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: operatorNamespace},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			Package: "etcd-operator", Channel: "alpha", CatalogSource: "etcd-operator", CatalogSourceNamespace: "olm",
			InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
		},
	})
	var csvName string
	support.Eventually(t, 5*time.Minute, "the Subscription's CSV to succeed", func() error {
		sub := &operatorsv1alpha1.Subscription{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, sub); err != nil {
			return err
		}
		if csvName = sub.Status.InstalledCSV; csvName == "" {
			return fmt.Errorf("no installed CSV yet; state %q, conditions %+v", sub.Status.State, sub.Status.Conditions)
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: csvName}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("CSV %s is %s: %s", csvName, csv.Status.Phase, csv.Status.Message)
		}
		return nil
	})
	t.Logf("from the Subscription to CSV %s Succeeded: %s", csvName, time.Since(subscribed).Round(100*time.Millisecond))

	// The operator runs as OLM made it: its Deployment belongs to the CSV
	// and runs as the ServiceAccount OLM bound the CSV's permissions to.
	deploy := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator-controller-manager"}, deploy); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(deploy); owner == nil || owner.Kind != "ClusterServiceVersion" || owner.Name != csvName {
		if refs := deploy.GetOwnerReferences(); len(refs) == 0 || refs[0].Kind != "ClusterServiceVersion" {
			t.Errorf("the operator's Deployment is not the CSV's: owners %+v", deploy.GetOwnerReferences())
		}
	}
	if sa := deploy.Spec.Template.Spec.ServiceAccountName; sa != "etcd-operator-controller-manager" {
		t.Errorf("the operator runs as ServiceAccount %q", sa)
	}

	support.Eventually(t, time.Minute, "the operator to say it is upgradeable", upgradeable(ctx, csvName, metav1.ConditionTrue, "No EtcdCluster is changing"))

	ns := "olm-users"
	create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	env.DumpOnFailure(t, ns)
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "simple", Namespace: ns},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr(int32(3))},
	}
	create(ctx, t, cluster)
	support.Eventually(t, 3*time.Minute, "the user's cluster to be Ready", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		if !clusterReady(cluster) {
			return fmt.Errorf("conditions: %+v", cluster.Status.Conditions)
		}
		return nil
	})

	// A cluster whose members cannot start (no such etcd build) stays in
	// the middle of its bootstrap: OLM must not upgrade the operator.
	stuck := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr(int32(1)), PodTemplate: etcdv1alpha1.PodTemplate{
			Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "quay.io/coreos/etcd:v3.6.99"}}},
		}},
	}
	create(ctx, t, stuck)
	support.Eventually(t, time.Minute, "Upgradeable False, naming the bootstrapping cluster", upgradeable(ctx, csvName, metav1.ConditionFalse, ns+"/stuck"))
	if err := k8sClient.Delete(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	support.Eventually(t, time.Minute, "Upgradeable True once it is gone", upgradeable(ctx, csvName, metav1.ConditionTrue, "No EtcdCluster is changing (1 in all)"))

	t.Run("upgrade waits for a roll", func(t *testing.T) { upgradeWaitsForARoll(ctx, t, csvName, cluster) })
}

// upgradeable checks the Upgradeable condition the operator of CSV
// csvName keeps in its OperatorCondition, as OLM reads it (status).
func upgradeable(ctx context.Context, csvName string, want metav1.ConditionStatus, mentions string) func() error {
	return func() error {
		oc := &operatorsv2.OperatorCondition{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: csvName}, oc); err != nil {
			return err
		}
		c := meta.FindStatusCondition(oc.Status.Conditions, operatorsv2.Upgradeable)
		if c == nil || c.Status != want || !strings.Contains(c.Message, mentions) {
			return fmt.Errorf("Upgradeable in OperatorCondition %s: %+v", csvName, c)
		}
		return nil
	}
}

func clusterReady(c *etcdv1alpha1.EtcdCluster) bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionReady)
}

// create creates obj; the test's end does not delete it (the local cluster
// goes down after this suite).
func create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func ptr[T any](v T) *T { return &v }
