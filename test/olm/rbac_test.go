package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// clusterScoped are the only resources the CSV may grant in
// clusterPermissions, which OLM grants cluster-wide in every install mode:
// the cluster-scoped kinds the operator reads. Everything else it touches
// lives in a namespace and belongs in permissions, which OLM scopes to the
// OperatorGroup's target namespaces.
var clusterScoped = []string{
	"nodes",                              // a member on a lost Node is replaced
	"authentication.k8s.io/tokenreviews", // metrics authentication
	"authorization.k8s.io/subjectaccessreviews", // metrics authorization
}

// namespaced are resources the operator reads or writes in the namespaces
// it watches; the CSV must grant each of them in permissions.
var namespaced = []string{
	"secrets", "pods", "persistentvolumeclaims", "services", "events",
	"policy/poddisruptionbudgets", "coordination.k8s.io/leases",
	"cert-manager.io/certificates", "cert-manager.io/issuers",
	"etcd.aenix.io/etcdclusters", "etcd.aenix.io/etcdtenants",
}

type permissions struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

// grantedResources lists the group/resource of every rule ("" group
// resources by name alone).
func grantedResources(perms []permissions) []string {
	var out []string
	for _, p := range perms {
		for _, r := range p.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if g != "" {
						res = g + "/" + res
					}
					out = append(out, res)
				}
			}
		}
	}
	return out
}

// TestBundlePermissionsAreNamespaced: what the operator touches in a
// namespace is in the CSV's permissions, so an operator installed for some
// namespaces (OwnNamespace, SingleNamespace, MultiNamespace) cannot read
// the Secrets, Pods or claims of the others; clusterPermissions hold only
// cluster-scoped resources.
func TestBundlePermissionsAreNamespaced(t *testing.T) {
	t.Parallel()
	var csv struct {
		Spec struct {
			Install struct {
				Spec struct {
					Permissions        []permissions `json:"permissions"`
					ClusterPermissions []permissions `json:"clusterPermissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	path := filepath.Join(root, "bundle", "manifests", "etcd-operator.clusterserviceversion.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	strategy := csv.Spec.Install.Spec
	for _, res := range grantedResources(strategy.ClusterPermissions) {
		if !slices.Contains(clusterScoped, res) {
			t.Errorf("clusterPermissions grant %s in every namespace whatever the install mode; grant it in permissions (bind its role with a RoleBinding in config/manifests)", res)
		}
	}
	for _, p := range strategy.ClusterPermissions {
		for _, r := range p.Rules {
			if len(r.NonResourceURLs) > 0 || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				t.Errorf("clusterPermissions hold a rule the test cannot check: %v", r)
			}
		}
	}
	granted := grantedResources(strategy.Permissions)
	for _, res := range namespaced {
		if !slices.Contains(granted, res) {
			t.Errorf("permissions do not grant %s", res)
		}
	}
}

// TestKustomizeInstallIsClusterWide: the plain install (config/default)
// watches every namespace, so it binds the manager's role with a
// ClusterRoleBinding; only the OLM bundle binds it per namespace.
func TestKustomizeInstallIsClusterWide(t *testing.T) {
	t.Parallel()
	kustomize := tool(t, "KUSTOMIZE_BIN")
	out, ok := run(t, root, kustomize, "build", "config/default")
	if !ok {
		t.Fatalf("kustomize build config/default:\n%s", out)
	}
	const role, account = "etcd-operator-manager-role", "etcd-operator-controller-manager"
	var bindings []string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var b rbacv1.ClusterRoleBinding
		if err := yaml.Unmarshal([]byte(doc), &b); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(b.Kind, "Binding") || b.RoleRef.Name != role {
			continue
		}
		bindings = append(bindings, fmt.Sprintf("%s %s", b.Kind, b.Name))
		if b.Kind == "ClusterRoleBinding" && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == account
		}) {
			return
		}
	}
	t.Errorf("config/default binds %s to %s with %v, want a ClusterRoleBinding", role, account, bindings)
}
