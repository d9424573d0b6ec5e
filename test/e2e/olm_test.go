package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// csv is the part of the bundle's ClusterServiceVersion OLM installs from.
type csv struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Install struct {
			Strategy string `json:"strategy"`
			Spec     struct {
				Permissions        []csvPermissions `json:"permissions"`
				ClusterPermissions []csvPermissions `json:"clusterPermissions"`
				Deployments        []struct {
					Name  string                `json:"name"`
					Label map[string]string     `json:"label"`
					Spec  appsv1.DeploymentSpec `json:"spec"`
				} `json:"deployments"`
			} `json:"spec"`
		} `json:"install"`
	} `json:"spec"`
}

type csvPermissions struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

// readCSV reads the CSV from bundle/manifests.
func readCSV(t *testing.T) *csv {
	t.Helper()
	path := filepath.Join(env.Root, "bundle", "manifests", "etcd-operator.clusterserviceversion.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &csv{}
	if err := yaml.Unmarshal(data, c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if c.Spec.Install.Strategy != "deployment" || len(c.Spec.Install.Spec.Deployments) == 0 {
		t.Fatalf("%s: install strategy %q with %d deployments, want the deployment strategy", path, c.Spec.Install.Strategy, len(c.Spec.Install.Spec.Deployments))
	}
	return c
}

// TestOLMInstallStrategy installs the operator from the bundle's CSV as
// OLM would, without OLM: the ServiceAccount, a Role and RoleBinding in the
// operator's namespace for each of `permissions`, a ClusterRole and
// ClusterRoleBinding for each of `clusterPermissions`, the CRDs of the
// bundle, and the Deployment of the install strategy with the annotations
// OLM puts on its pod template (olm.targetNamespaces from the
// OperatorGroup). In AllNamespaces mode OLM also lifts `permissions` to
// cluster scope; in OwnNamespace mode the target namespace is the
// operator's own, which needs nothing more. In both modes an EtcdCluster
// comes up Ready under that RBAC alone; in OwnNamespace mode the operator
// may not list the Secrets, Pods or claims of any other namespace (a
// SubjectAccessReview for its ServiceAccount). The operator installed from config/
// is scaled to 0 meanwhile (two operators would fight over the same
// clusters) and restored afterwards.
//
// Runs alone (no t.Parallel): it replaces the operator every other test
// relies on.
func TestOLMInstallStrategy(t *testing.T) {
	ctx := context.Background()
	c := readCSV(t)
	pauseConfigOperator(ctx, t)
	applyBundleCRDs(ctx, t)

	t.Run("AllNamespaces", func(t *testing.T) {
		operatorNS := newNamespace(ctx, t)
		installFromCSV(ctx, t, c, operatorNS, "")
		// A cluster in another namespace: the operator watches them all.
		clusterNS := newNamespace(ctx, t)
		bringUpCluster(ctx, t, clusterNS, "olm-all", 3)
		assertAccess(ctx, t, c, operatorNS, "list", "secrets", "", true)
	})

	t.Run("OwnNamespace", func(t *testing.T) {
		operatorNS := newNamespace(ctx, t)
		installFromCSV(ctx, t, c, operatorNS, operatorNS)
		// A cluster outside the target namespace is not the operator's.
		elsewhere := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(ctx, t), Name: "not-watched"}}
		elsewhere.Spec.Replicas = ptr.To[int32](1)
		if err := k8sClient.Create(ctx, elsewhere); err != nil {
			t.Fatal(err)
		}
		bringUpCluster(ctx, t, operatorNS, "olm-own", 3)
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(elsewhere), elsewhere); err != nil {
			t.Fatal(err)
		}
		if len(elsewhere.Status.Conditions) > 0 {
			t.Errorf("the operator watching only %s reconciled %s/%s: %v", operatorNS, elsewhere.Namespace, elsewhere.Name, elsewhere.Status.Conditions)
		}
		// The CSV's permissions are the operator's only access to
		// namespaced resources: none of them reaches another namespace.
		for _, resource := range []string{"secrets", "pods", "persistentvolumeclaims"} {
			assertAccess(ctx, t, c, operatorNS, "list", resource, operatorNS, true)
			assertAccess(ctx, t, c, operatorNS, "list", resource, elsewhere.Namespace, false)
			assertAccess(ctx, t, c, operatorNS, "list", resource, "", false)
		}
	})
}

// assertAccess checks with a SubjectAccessReview whether the ServiceAccount
// of the CSV's Deployment, installed in ns, may verb resource (core group)
// in namespace ("" for every namespace at once).
func assertAccess(ctx context.Context, t *testing.T, c *csv, ns, verb, resource, namespace string, want bool) {
	t.Helper()
	sa := c.Spec.Install.Spec.Deployments[0].Spec.Template.Spec.ServiceAccountName
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Resource: resource},
	}}
	if err := k8sClient.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if review.Status.Allowed != want {
		where := "namespace " + namespace
		if namespace == "" {
			where = "all namespaces"
		}
		t.Errorf("%s may %s %s in %s: %v, want %v (%s)", review.Spec.User, verb, resource, where, review.Status.Allowed, want, review.Status.Reason)
	}
}

// bringUpCluster creates an EtcdCluster and waits until it is Ready and
// etcd lists its members.
func bringUpCluster(ctx context.Context, t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	cluster.Spec.Replicas = ptr.To(replicas)
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	took := awaitReady(ctx, t, client.ObjectKeyFromObject(cluster), replicas)
	cli := etcdClient(ctx, t, ns, name)
	assertMembers(ctx, t, cli, ns, int(replicas))
	if _, err := cli.Put(ctx, "/e2e/olm", "installed by the CSV"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s: %d members Ready in %s", ns, name, replicas, took.Round(time.Second))
}

// configOperator is the Deployment InstallOperator applies from config/.
var configOperator = client.ObjectKey{Namespace: "etcd-operator-system", Name: "etcd-operator-controller-manager"}

// pauseConfigOperator scales the operator installed from config/ to 0 and
// waits until its pods are gone; when the test ends it installs it again
// (replicas, CRD and RBAC as config/ has them) and waits until it runs.
func pauseConfigOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := env.InstallOperator(); err != nil {
			t.Errorf("restoring the operator installed from config/: %v", err)
		}
	})
	dep := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, configOperator, dep); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = ptr.To[int32](0)
	if err := k8sClient.Patch(ctx, dep, patch); err != nil {
		t.Fatal(err)
	}
	awaitNoPods(ctx, t, configOperator.Namespace, dep.Spec.Selector.MatchLabels)
}

// awaitNoPods waits until no pod of the selector is left in ns.
func awaitNoPods(ctx context.Context, t *testing.T, ns string, selector map[string]string) {
	t.Helper()
	support.Eventually(t, 2*time.Minute, fmt.Sprintf("the pods %v in %s to be gone", selector, ns), func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
}

// applyBundleCRDs creates or updates the CRDs of bundle/manifests, as OLM's
// install plan does before the CSV.
func applyBundleCRDs(ctx context.Context, t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(env.Root, "bundle", "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		for _, obj := range support.ReadObjects(t, f) {
			if obj.GetKind() != "CustomResourceDefinition" {
				continue
			}
			n++
			current := &unstructured.Unstructured{}
			current.SetGroupVersionKind(obj.GroupVersionKind())
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), current)
			switch {
			case apierrors.IsNotFound(err):
				err = k8sClient.Create(ctx, obj)
			case err == nil:
				obj.SetResourceVersion(current.GetResourceVersion())
				err = k8sClient.Update(ctx, obj)
			}
			if err != nil {
				t.Fatalf("applying CRD %s: %v", obj.GetName(), err)
			}
		}
	}
	if n == 0 {
		t.Fatal("bundle/manifests has no CRD")
	}
}

// installFromCSV applies the CSV's install strategy in namespace ns for an
// OperatorGroup targeting targetNamespaces ("" for all namespaces) and
// waits until the operator's Deployment is available. Everything it creates
// outside ns is deleted when the test ends; ns goes with its namespace.
func installFromCSV(ctx context.Context, t *testing.T, c *csv, ns, targetNamespaces string) {
	t.Helper()
	strategy := c.Spec.Install.Spec
	owner := map[string]string{"olm.owner": c.Metadata.Name, "olm.owner.namespace": ns, "olm.owner.kind": "ClusterServiceVersion"}
	create := func(obj client.Object) {
		t.Helper()
		labels := maps.Clone(obj.GetLabels())
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, owner)
		obj.SetLabels(labels)
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
		if obj.GetNamespace() == "" {
			t.Cleanup(func() {
				if err := k8sClient.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
				}
			})
		}
	}
	subject := func(sa string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	}

	accounts := map[string]bool{}
	for _, p := range append(strategy.Permissions, strategy.ClusterPermissions...) {
		accounts[p.ServiceAccountName] = true
	}
	for _, d := range strategy.Deployments {
		accounts[d.Spec.Template.Spec.ServiceAccountName] = true
	}
	for sa := range accounts {
		create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}

	for i, p := range strategy.Permissions {
		name := fmt.Sprintf("%s-%d", c.Metadata.Name, i)
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: p.Rules})
		create(&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subject(p.ServiceAccountName),
		})
		if targetNamespaces == "" {
			// OLM's global OperatorGroup lifts the Role to cluster scope,
			// adding read access to namespaces.
			rules := append(slices.Clone(p.Rules), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
			create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules})
			create(&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-" + name},
				Subjects:   subject(p.ServiceAccountName),
			})
		}
	}
	for i, p := range strategy.ClusterPermissions {
		name := fmt.Sprintf("%s-%s-cluster-%d", ns, c.Metadata.Name, i)
		create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules})
		create(&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subject(p.ServiceAccountName),
		})
	}

	for _, d := range strategy.Deployments {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name, Labels: maps.Clone(d.Label)}, Spec: *d.Spec.DeepCopy()}
		// The pod template carries the CSV's annotations and the
		// OperatorGroup's; the template's own win.
		annotations := maps.Clone(c.Metadata.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["olm.operatorGroup"] = "e2e"
		annotations["olm.operatorNamespace"] = ns
		annotations["olm.targetNamespaces"] = targetNamespaces
		maps.Copy(annotations, dep.Spec.Template.Annotations)
		dep.Spec.Template.Annotations = annotations
		for i := range dep.Spec.Template.Spec.Containers {
			ctr := &dep.Spec.Template.Spec.Containers[i]
			ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "OPERATOR_CONDITION_NAME", Value: c.Metadata.Name})
		}
		create(dep)
		// The operator must be gone before the config/ one comes back.
		t.Cleanup(func() {
			if t.Failed() {
				logOperator(t, ns, dep.Spec.Selector.MatchLabels)
			}
			if err := k8sClient.Delete(context.Background(), dep); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the operator's Deployment: %v", err)
			}
			awaitNoPods(context.Background(), t, ns, dep.Spec.Selector.MatchLabels)
		})
		awaitAvailable(ctx, t, client.ObjectKeyFromObject(dep))
	}
}

// logOperator logs the errors in the operator's log (RBAC refusals show
// there), before its pods and their logs go.
func logOperator(t *testing.T, ns string, selector map[string]string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
		t.Logf("listing the operator's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var errs []string
		for line := range strings.SplitSeq(env.ContainerLog(ns, p.Name, "manager"), "\n") {
			if strings.Contains(line, `"level":"error"`) {
				errs = append(errs, line)
			}
		}
		if len(errs) > 20 {
			errs = errs[len(errs)-20:]
		}
		t.Logf("the last errors of the operator %s/%s:\n%s", ns, p.Name, strings.Join(errs, "\n"))
	}
}

// awaitAvailable waits until a Deployment's pods all run its current
// template and are ready.
func awaitAvailable(ctx context.Context, t *testing.T, key client.ObjectKey) {
	t.Helper()
	support.Eventually(t, 3*time.Minute, "the operator's Deployment "+key.String()+" to be available", func() error {
		dep := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, key, dep); err != nil {
			return err
		}
		want := ptr.Deref(dep.Spec.Replicas, 1)
		s := dep.Status
		if s.ObservedGeneration != dep.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want {
			var msgs []string
			for _, c := range s.Conditions {
				msgs = append(msgs, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
			}
			return errors.New("status: " + strings.Join(msgs, "; "))
		}
		return nil
	})
}
