package olmlive

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

const (
	// catalogNamespace holds the CatalogSources every namespace sees.
	catalogNamespace = "olm"
	// deploymentName is the operator's Deployment in its CSV.
	deploymentName = "etcd-operator-controller-manager"
)

// install is one installation of the operator by OLM: the namespace of its
// Subscription, OperatorGroup and CSV, and the CSV.
type install struct {
	namespace string
	csv       string
	// allNamespaces: the OperatorGroup targets every namespace.
	allNamespaces bool
}

// TestOperatorLifecycle follows the operator through OLM as a user meets
// it, one step after another on the same clusters:
//   - cert-manager, which the operator asks for certificates, is installed
//     first from the community catalog, in the global operators namespace;
//   - the operator, subscribed in OwnNamespace mode with manual approval,
//     waits for its InstallPlan to be approved, then runs with the RBAC OLM
//     made from its CSV and manages the clusters of its namespace only;
//   - uninstalled, it leaves every cluster serving; installed again, in
//     AllNamespaces mode, it takes them over without restarting a member
//     and manages the cluster it had left alone;
//   - it keeps Upgradeable on its OperatorCondition;
//   - the next release is held while a roll is in progress, installed by
//     OLM once it ends, and no write acknowledged by either cluster is lost.
func TestOperatorLifecycle(t *testing.T) {
	ctx := context.Background()
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("catalog", func(t *testing.T) { serveCatalog(ctx, t) })
	step("cert-manager first", func(t *testing.T) {
		subscribed := time.Now()
		csv := subscribe(ctx, t, "operators", "cert-manager", "operatorhubio-catalog", operatorsv1alpha1.ApprovalAutomatic)
		t.Logf("cert-manager: from the Subscription to CSV %s Succeeded: %s", csv, time.Since(subscribed).Round(100*time.Millisecond))
	})

	own := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: "etcd-own"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr(int32(3))},
	}
	outside := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "outside", Namespace: "olm-users"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr(int32(3))},
	}
	var first install
	step("OwnNamespace with manual approval", func(t *testing.T) {
		first = installOwnNamespace(ctx, t, own.Namespace)
		checkRBAC(ctx, t, first)
		env.DumpOnFailure(t, own.Namespace)
		create(ctx, t, own)
		awaitReady(ctx, t, own)
		// A cluster outside the operator's namespace is not the
		// operator's: it stays as created.
		create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outside.Namespace}})
		create(ctx, t, outside)
		time.Sleep(20 * time.Second)
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(outside), outside); err != nil {
			t.Fatal(err)
		}
		if len(outside.Status.Conditions) > 0 || len(memberPods(ctx, t, outside)) > 0 {
			t.Fatalf("an operator installed for namespace %s managed %s/%s: conditions %+v", own.Namespace, outside.Namespace, outside.Name, outside.Status.Conditions)
		}
	})

	step("uninstall and install again", func(t *testing.T) {
		env.DumpOnFailure(t, own.Namespace)
		env.DumpOnFailure(t, outside.Namespace)
		cli := etcdClient(ctx, t, own)
		if _, err := cli.Put(ctx, "/olm/before-uninstall", "kept"); err != nil {
			t.Fatal(err)
		}
		ids, pods := support.MemberIDs(ctx, t, cli), memberPods(ctx, t, own)
		secrets := secretNames(ctx, t, own.Namespace)

		uninstall(ctx, t, first)
		// Nothing of the user's went with the operator, and the cluster
		// serves.
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
			t.Fatalf("the EtcdCluster went with the operator: %v", err)
		}
		if after := memberPods(ctx, t, own); !maps.Equal(pods, after) {
			t.Fatalf("uninstalling the operator changed the member Pods: before %v, after %v", pods, after)
		}
		if after := secretNames(ctx, t, own.Namespace); !slices.Equal(secrets, after) {
			t.Fatalf("uninstalling the operator changed the Secrets: before %v, after %v", secrets, after)
		}
		if _, err := cli.Put(ctx, "/olm/while-uninstalled", "kept"); err != nil {
			t.Fatalf("with the operator uninstalled the cluster does not take writes: %v", err)
		}

		second := installAllNamespaces(ctx, t)
		checkRBAC(ctx, t, second)
		awaitReady(ctx, t, own)
		awaitReady(ctx, t, outside)
		if after := support.MemberIDs(ctx, t, cli); !maps.Equal(ids, after) {
			t.Errorf("after the reinstall etcd's members are %v, want %v", after, ids)
		}
		if after := memberPods(ctx, t, own); !maps.Equal(pods, after) {
			t.Errorf("the reinstalled operator restarted members: before %v, after %v", pods, after)
		}
		for _, key := range []string{"/olm/before-uninstall", "/olm/while-uninstalled"} {
			if resp, err := cli.Get(ctx, key); err != nil || len(resp.Kvs) != 1 {
				t.Errorf("get %s after the reinstall: %v, %v", key, resp, err)
			}
		}
	})

	csv := "etcd-operator.v0.1.0"
	step("Upgradeable", func(t *testing.T) {
		env.DumpOnFailure(t, outside.Namespace)
		support.Eventually(t, time.Minute, "the operator to say it is upgradeable", upgradeable(ctx, csv, metav1.ConditionTrue, "No EtcdCluster is changing"))
		// A cluster whose members cannot start (no such etcd build) stays
		// in the middle of its bootstrap: OLM must not upgrade the
		// operator.
		stuck := &etcdv1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: outside.Namespace},
			Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr(int32(1)), PodTemplate: etcdv1alpha1.PodTemplate{
				Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: unknownEtcdImage}}},
			}},
		}
		create(ctx, t, stuck)
		support.Eventually(t, time.Minute, "Upgradeable False, naming the bootstrapping cluster", upgradeable(ctx, csv, metav1.ConditionFalse, outside.Namespace+"/stuck"))
		if err := k8sClient.Delete(ctx, stuck); err != nil {
			t.Fatal(err)
		}
		support.Eventually(t, time.Minute, "Upgradeable True once it is gone", upgradeable(ctx, csv, metav1.ConditionTrue, "No EtcdCluster is changing (2 in all)"))
	})

	step("upgrade waits for a roll", func(t *testing.T) {
		env.DumpOnFailure(t, own.Namespace)
		env.DumpOnFailure(t, outside.Namespace)
		upgradeWaitsForARoll(ctx, t, csv, outside, own)
	})
}

// serveCatalog adds the CatalogSource of the catalog image under test and
// waits for its registry Pod to serve.
func serveCatalog(ctx context.Context, t *testing.T) {
	create(ctx, t, &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: catalogNamespace},
		Spec:       operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Image: *catalogImage, DisplayName: "etcd operator"},
	})
	support.Eventually(t, 3*time.Minute, "the catalog's registry to serve", func() error {
		cs := &operatorsv1alpha1.CatalogSource{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: catalogNamespace, Name: "etcd-operator"}, cs); err != nil {
			return err
		}
		if cs.Status.GRPCConnectionState == nil || cs.Status.GRPCConnectionState.LastObservedState != "READY" {
			return fmt.Errorf("connection state: %+v", cs.Status.GRPCConnectionState)
		}
		return nil
	})
}

// installOwnNamespace subscribes to the operator in namespace ns, with an
// OperatorGroup targeting ns only and manual approval: OLM makes an
// InstallPlan and installs nothing until the test approves it.
func installOwnNamespace(ctx context.Context, t *testing.T, ns string) install {
	t.Helper()
	create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(ctx, t, &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: ns},
		Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: []string{ns}},
	})
	subscribed := time.Now()
	subscription(ctx, t, ns, "etcd-operator", "etcd-operator", operatorsv1alpha1.ApprovalManual)
	var plan *operatorsv1alpha1.InstallPlan
	support.Eventually(t, 3*time.Minute, "an InstallPlan that asks for approval", func() error {
		sub := &operatorsv1alpha1.Subscription{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-operator"}, sub); err != nil {
			return err
		}
		if sub.Status.InstallPlanRef == nil {
			return fmt.Errorf("no InstallPlan yet; state %q, conditions %+v", sub.Status.State, sub.Status.Conditions)
		}
		plan = &operatorsv1alpha1.InstallPlan{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: sub.Status.InstallPlanRef.Name}, plan); err != nil {
			return err
		}
		if plan.Status.Phase != operatorsv1alpha1.InstallPlanPhaseRequiresApproval {
			return fmt.Errorf("InstallPlan %s is %s", plan.Name, plan.Status.Phase)
		}
		return nil
	})
	// Not approved, nothing is installed.
	time.Sleep(5 * time.Second)
	if csvs := installedCSVs(ctx, t, ns); len(csvs) > 0 {
		t.Fatalf("before its InstallPlan was approved, OLM installed %v", csvs)
	}
	if !slices.Contains(plan.Spec.ClusterServiceVersionNames, "etcd-operator.v0.1.0") {
		t.Fatalf("InstallPlan %s installs %v", plan.Name, plan.Spec.ClusterServiceVersionNames)
	}
	patch := client.MergeFrom(plan.DeepCopy())
	plan.Spec.Approved = true
	if err := k8sClient.Patch(ctx, plan, patch); err != nil {
		t.Fatal(err)
	}
	in := install{namespace: ns, csv: awaitCSV(ctx, t, ns, "etcd-operator")}
	t.Logf("OwnNamespace: from the Subscription to CSV %s Succeeded, the approval included: %s", in.csv, time.Since(subscribed).Round(100*time.Millisecond))
	checkDeployment(ctx, t, in)
	return in
}

// installAllNamespaces subscribes to the operator in its own namespace,
// whose OperatorGroup targets every namespace, with automatic approval.
func installAllNamespaces(ctx context.Context, t *testing.T) install {
	t.Helper()
	ns := "etcd-operator"
	create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(ctx, t, &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator", Namespace: ns}})
	subscribed := time.Now()
	in := install{namespace: ns, csv: subscribe(ctx, t, ns, "etcd-operator", "etcd-operator", operatorsv1alpha1.ApprovalAutomatic), allNamespaces: true}
	t.Logf("AllNamespaces: from the Subscription to CSV %s Succeeded: %s", in.csv, time.Since(subscribed).Round(100*time.Millisecond))
	checkDeployment(ctx, t, in)
	return in
}

// subscribe subscribes to pkg's alpha or stable channel (its default) from
// CatalogSource source and waits for its CSV to succeed; it returns the
// CSV's name.
func subscribe(ctx context.Context, t *testing.T, ns, pkg, source string, approval operatorsv1alpha1.Approval) string {
	t.Helper()
	subscription(ctx, t, ns, pkg, source, approval)
	return awaitCSV(ctx, t, ns, pkg)
}

func subscription(ctx context.Context, t *testing.T, ns, pkg, source string, approval operatorsv1alpha1.Approval) {
	t.Helper()
	spec := &operatorsv1alpha1.SubscriptionSpec{Package: pkg, CatalogSource: source, CatalogSourceNamespace: catalogNamespace, InstallPlanApproval: approval}
	if pkg == "etcd-operator" {
		spec.Channel = "alpha"
	}
	create(ctx, t, &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: pkg, Namespace: ns}, Spec: spec})
}

// awaitCSV waits for Subscription name in ns to have installed a CSV that
// succeeded, and returns its name.
func awaitCSV(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	var csvName string
	support.Eventually(t, 5*time.Minute, "Subscription "+ns+"/"+name+"'s CSV to succeed", func() error {
		sub := &operatorsv1alpha1.Subscription{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sub); err != nil {
			return err
		}
		if csvName = sub.Status.InstalledCSV; csvName == "" {
			return fmt.Errorf("no installed CSV yet; state %q, conditions %+v", sub.Status.State, sub.Status.Conditions)
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: csvName}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("CSV %s is %s: %s", csvName, csv.Status.Phase, csv.Status.Message)
		}
		return nil
	})
	return csvName
}

// installedCSVs are the CSVs installed in ns, not those OLM copies there
// from operators that target every namespace.
func installedCSVs(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	if err := k8sClient.List(ctx, csvs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range csvs.Items {
		if !c.IsCopied() {
			names = append(names, c.Name)
		}
	}
	return names
}

// checkDeployment: the operator runs as OLM made it, its Deployment
// belonging to the CSV and running as the ServiceAccount OLM bound the
// CSV's permissions to.
func checkDeployment(ctx context.Context, t *testing.T, in install) {
	t.Helper()
	deploy := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: deploymentName}, deploy); err != nil {
		t.Fatal(err)
	}
	if !ownedBy(deploy, "ClusterServiceVersion", in.csv) {
		t.Errorf("the operator's Deployment is not CSV %s's: owners %+v, labels %v", in.csv, deploy.GetOwnerReferences(), deploy.GetLabels())
	}
	if sa := deploy.Spec.Template.Spec.ServiceAccountName; sa != deploymentName {
		t.Errorf("the operator runs as ServiceAccount %q", sa)
	}
}

// ownedBy: obj belongs to the object of that kind and name, by an owner
// reference (objects in its namespace) or by OLM's owner labels (objects
// in other namespaces, or of the cluster).
func ownedBy(obj client.Object, kind, name string) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && ref.Name == name {
			return true
		}
	}
	labels := obj.GetLabels()
	return labels["olm.owner"] == name && labels["olm.owner.kind"] == kind
}

// checkRBAC: the operator's ServiceAccount is bound to exactly the rules
// of its CSV's permissions and clusterPermissions, by bindings OLM made
// for that CSV, and to nothing else but the Role OLM makes for its
// OperatorCondition. In AllNamespaces mode OLM lifts the permissions into a
// ClusterRole, to which it adds reading Namespaces.
func checkRBAC(ctx context.Context, t *testing.T, in install) {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.csv}, csv); err != nil {
		t.Fatal(err)
	}
	strategy := csv.Spec.InstallStrategy.StrategySpec
	var want []string
	for _, p := range append(slices.Clone(strategy.Permissions), strategy.ClusterPermissions...) {
		if p.ServiceAccountName == deploymentName {
			want = append(want, ruleStrings(p.Rules)...)
		}
	}
	if in.allNamespaces {
		want = append(want, ruleStrings([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}})...)
	}

	var got []string
	bound := func(binding client.Object, subjects []rbacv1.Subject, role rbacv1.RoleRef) {
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == deploymentName && s.Namespace == in.namespace
		}) {
			return
		}
		var rules []rbacv1.PolicyRule
		if role.Kind == "ClusterRole" {
			cr := &rbacv1.ClusterRole{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: role.Name}, cr); err != nil {
				t.Fatal(err)
			}
			rules = cr.Rules
		} else {
			r := &rbacv1.Role{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: binding.GetNamespace(), Name: role.Name}, r); err != nil {
				t.Fatal(err)
			}
			rules = r.Rules
		}
		switch {
		case ownedBy(binding, "ClusterServiceVersion", in.csv):
			got = append(got, ruleStrings(rules)...)
		case ownedBy(binding, "OperatorCondition", in.csv):
			for _, r := range rules {
				if !slices.Equal(r.Resources, []string{"operatorconditions"}) || !slices.Equal(r.ResourceNames, []string{in.csv}) {
					t.Errorf("binding %s/%s, made for the OperatorCondition, grants %+v", binding.GetNamespace(), binding.GetName(), r)
				}
			}
		default:
			t.Errorf("the operator's ServiceAccount is bound by %s/%s, which OLM did not make for CSV %s (owners %+v, labels %v)",
				binding.GetNamespace(), binding.GetName(), in.csv, binding.GetOwnerReferences(), binding.GetLabels())
		}
	}
	crbs := &rbacv1.ClusterRoleBindingList{}
	rbs := &rbacv1.RoleBindingList{}
	if err := k8sClient.List(ctx, crbs); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.List(ctx, rbs); err != nil {
		t.Fatal(err)
	}
	for i := range crbs.Items {
		bound(&crbs.Items[i], crbs.Items[i].Subjects, crbs.Items[i].RoleRef)
	}
	for i := range rbs.Items {
		bound(&rbs.Items[i], rbs.Items[i].Subjects, rbs.Items[i].RoleRef)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(slices.Compact(want), slices.Compact(got)) {
		t.Errorf("the operator's ServiceAccount is bound to rules\n%s\nwant its CSV's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// ruleStrings spells each rule out per API group, resource and verb, so
// rules written in different groupings compare equal.
func ruleStrings(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				out = append(out, fmt.Sprintf("url %s %s", url, verb))
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, fmt.Sprintf("%s/%s %s %v", group, res, verb, r.ResourceNames))
				}
			}
		}
	}
	return out
}

// uninstall removes the operator as OLM's docs say: the Subscription,
// then the CSV; OLM removes the Deployment and the RBAC it made.
func uninstall(ctx context.Context, t *testing.T, in install) {
	t.Helper()
	for _, obj := range []client.Object{
		&operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: in.namespace, Name: "etcd-operator"}},
		&operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: in.namespace, Name: in.csv}},
	} {
		if err := k8sClient.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	support.Eventually(t, 2*time.Minute, "the operator's Deployment and Pods to go", func() error {
		switch err := k8sClient.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: deploymentName}, &appsv1.Deployment{}); {
		case err == nil:
			return errors.New("the Deployment is still there")
		case !apierrors.IsNotFound(err):
			return err
		}
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(in.namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d operator Pods left", len(pods.Items))
		}
		return nil
	})
}

// upgradeable checks the Upgradeable condition the operator of CSV
// csvName keeps in its OperatorCondition, as OLM reads it (status).
func upgradeable(ctx context.Context, csvName string, want metav1.ConditionStatus, mentions string) func() error {
	return func() error {
		oc := &operatorsv2.OperatorCondition{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "etcd-operator", Name: csvName}, oc); err != nil {
			return err
		}
		c := meta.FindStatusCondition(oc.Status.Conditions, operatorsv2.Upgradeable)
		if c == nil || c.Status != want || !strings.Contains(c.Message, mentions) {
			return fmt.Errorf("Upgradeable in OperatorCondition %s: %+v", csvName, c)
		}
		return nil
	}
}

func awaitReady(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	support.Eventually(t, 3*time.Minute, "cluster "+c.Namespace+"/"+c.Name+" to be Ready", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if !clusterReady(c) {
			return fmt.Errorf("conditions: %+v", c.Status.Conditions)
		}
		return nil
	})
}

func clusterReady(c *etcdv1alpha1.EtcdCluster) bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionReady)
}

// readyWatch checks, twice a second until stopped, that every cluster is
// Ready; stopping returns the first time one was not.
func readyWatch(ctx context.Context, clusters ...*etcdv1alpha1.EtcdCluster) (stop func() error) {
	wctx, cancel := context.WithCancel(ctx)
	var (
		mu       sync.Mutex
		notReady error
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		for wctx.Err() == nil {
			for _, c := range clusters {
				got := &etcdv1alpha1.EtcdCluster{}
				err := k8sClient.Get(wctx, client.ObjectKeyFromObject(c), got)
				if wctx.Err() != nil {
					return
				}
				mu.Lock()
				switch {
				case notReady != nil:
				case err != nil:
					notReady = fmt.Errorf("%s: reading %s/%s: %w", time.Now().Format(time.StampMilli), c.Namespace, c.Name, err)
				case !clusterReady(got):
					notReady = fmt.Errorf("%s: %s/%s not Ready: %+v", time.Now().Format(time.StampMilli), c.Namespace, c.Name, got.Status.Conditions)
				}
				mu.Unlock()
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	return func() error {
		cancel()
		wg.Wait()
		return notReady
	}
}

// etcdClient connects to cluster c through its client Service.
func etcdClient(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) *clientv3.Client {
	t.Helper()
	return support.EtcdClient(ctx, t, k8sClient, c.Namespace, c.Name)
}

// memberPods are the UIDs and restart counts of a cluster's member Pods.
func memberPods(ctx context.Context, t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s, %d restarts", p.UID, restarts)
	}
	return out
}

// secretNames are the names and UIDs of the Secrets in ns.
func secretNames(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	secrets := &corev1.SecretList{}
	if err := k8sClient.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range secrets.Items {
		out = append(out, s.Name+" "+string(s.UID))
	}
	slices.Sort(out)
	return out
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
