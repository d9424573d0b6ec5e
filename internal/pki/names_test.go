package pki

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// The names tests attack the limits the schema sets on cluster and tenant
// names (api/v1alpha1: MaxClusterNameLength, ReservedClusterNameSuffixes,
// MaxTenantNameLength): every object the operator derives from a name
// must be valid, and no two clusters of one namespace may derive the same
// object, unless the schema refuses one of the two names.

// everything is a cluster that creates every kind of object the operator
// makes: members with claims, a budget, operator-managed TLS with its own
// CAs, and auth.
func everything(name, namespace string) *etcdv1alpha1.EtcdCluster {
	c := managed(etcdv1alpha1.CertManagerSpec{})
	c.Name, c.Namespace = name, namespace
	c.Spec.Security.EnableAuth = true
	c.Spec.PodDisruptionBudgetTemplate = &etcdv1alpha1.PodDisruptionBudgetTemplate{}
	c.Spec.Storage.VolumeClaimTemplate = &etcdv1alpha1.EmbeddedPersistentVolumeClaim{}
	return c
}

// memberNumbers are the member numbers the names are checked with: the
// first ones, and one far beyond what a cluster ever reaches (each
// replacement takes the next number).
var memberNumbers = []int{0, 1, 2, 99999999}

// derived are the objects the operator creates for cluster c, as
// kind/name, with their labels.
func derived(c *etcdv1alpha1.EtcdCluster) map[string]metav1.ObjectMeta {
	out := map[string]metav1.ObjectMeta{}
	add := func(kind string, m metav1.ObjectMeta) { out[kind+"/"+m.Name] = m }
	add("Service", builder.HeadlessService(c).ObjectMeta)
	add("Service", builder.ClientService(c).ObjectMeta)
	add("PodDisruptionBudget", builder.PodDisruptionBudget(c).ObjectMeta)
	for _, n := range memberNumbers {
		member := fmt.Sprintf("%s-%d", c.Name, n) // as controllers.nextMemberName
		add("Pod", builder.MemberPod(c, builder.Member{Name: member, ClusterState: builder.ClusterStateNew}).ObjectMeta)
		add("PersistentVolumeClaim", builder.MemberClaim(c, member).ObjectMeta)
	}
	for _, i := range Issuers(c) {
		add("Issuer", i.ObjectMeta)
	}
	for _, crt := range Certificates(c) {
		add("Certificate", crt.ObjectMeta)
	}
	for _, s := range append(SecretsOf(c), builder.RootPasswordSecretName(c)) {
		add("Secret", builder.ObjectMeta(c, s, etcdv1alpha1.EmbeddedObjectMetadata{}))
	}
	return out
}

func TestDerivedNamesAreValid(t *testing.T) {
	t.Parallel()
	longest := strings.Repeat("a", etcdv1alpha1.MaxClusterNameLength)
	namespace := strings.Repeat("n", validation.DNS1123LabelMaxLength)
	c := everything(longest, namespace)
	for key, m := range derived(c) {
		kind := key[:strings.Index(key, "/")]
		var errs []string
		switch kind {
		case "Service":
			errs = validation.IsDNS1035Label(m.Name)
		case "Pod": // the member name is also the Pod's hostname
			errs = validation.IsDNS1123Label(m.Name)
		default:
			errs = validation.IsDNS1123Subdomain(m.Name)
		}
		for k, v := range m.Labels {
			errs = append(errs, validation.IsValidLabelValue(v)...)
			errs = append(errs, validation.IsQualifiedName(k)...)
		}
		if len(errs) > 0 {
			t.Errorf("%s: %v", key, errs)
		}
	}
	for _, crt := range Certificates(c) {
		if n := len(crt.Spec.CommonName); n > maxCommonName {
			t.Errorf("Certificate %s: common name %q has %d characters, more than %d", crt.Name, crt.Spec.CommonName, n, maxCommonName)
		}
		for _, dns := range crt.Spec.DNSNames {
			if errs := validation.IsWildcardDNS1123Subdomain(dns); strings.HasPrefix(dns, "*.") && len(errs) > 0 {
				t.Errorf("Certificate %s: DNS name %q: %v", crt.Name, dns, errs)
			} else if errs := validation.IsDNS1123Subdomain(dns); !strings.HasPrefix(dns, "*.") && len(errs) > 0 {
				t.Errorf("Certificate %s: DNS name %q: %v", crt.Name, dns, errs)
			}
		}
	}
	for _, m := range memberNumbers {
		if host := builder.MemberHost(c, fmt.Sprintf("%s-%d", c.Name, m)); len(validation.IsDNS1123Subdomain(host)) > 0 {
			t.Errorf("member host %q: %v", host, validation.IsDNS1123Subdomain(host))
		}
	}

	tenant := &etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("t", etcdv1alpha1.MaxTenantNameLength), Namespace: namespace}}
	crt := TenantCertificate(c, tenant)
	if n := len(crt.Spec.CommonName); n > maxCommonName {
		t.Errorf("tenant certificate: common name %q has %d characters, more than %d", crt.Spec.CommonName, n, maxCommonName)
	}
	for _, name := range []string{crt.Name, tenant.ConnectionSecretName()} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("tenant object %q: %v", name, errs)
		}
	}
	for _, v := range crt.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("tenant certificate label %q: %v", v, errs)
		}
	}
	tenant.Name += "t"
	if n := len(TenantCertificate(c, tenant).Spec.CommonName); n <= maxCommonName {
		t.Errorf("a tenant name of %d characters gives a common name of %d: MaxTenantNameLength could be longer", len(tenant.Name), n)
	}
}

// TestClusterNamesDoNotCollide puts beside cluster "foo" every cluster
// whose name could give an object the name of one of foo's: each name of
// foo's objects, cut at each '-'. Two clusters may share an object only
// when the schema refuses the second name (ReservedClusterNameSuffixes),
// and every reserved suffix must be needed.
func TestClusterNamesDoNotCollide(t *testing.T) {
	t.Parallel()
	foo := derived(everything("foo", "ns"))
	candidates := map[string]bool{}
	for key := range foo {
		name := key[strings.Index(key, "/")+1:]
		for i := len("foo"); i <= len(name); i++ {
			if i == len(name) || name[i] == '-' {
				candidates[name[:i]] = true
			}
		}
	}
	delete(candidates, "foo")
	needed := map[string]bool{}
	for other := range candidates {
		var shared []string
		for key := range derived(everything(other, "ns")) {
			if _, ok := foo[key]; ok {
				shared = append(shared, key)
			}
		}
		if len(shared) == 0 {
			continue
		}
		slices.Sort(shared)
		i := slices.IndexFunc(etcdv1alpha1.ReservedClusterNameSuffixes, func(s string) bool { return strings.HasSuffix(other, s) })
		if i < 0 {
			t.Errorf("clusters foo and %s both own %v, and the schema accepts both names: reserve the ending in ReservedClusterNameSuffixes and the schema rule on EtcdCluster", other, shared)
			continue
		}
		needed[etcdv1alpha1.ReservedClusterNameSuffixes[i]] = true
	}
	for _, s := range etcdv1alpha1.ReservedClusterNameSuffixes {
		if !needed[s] {
			t.Errorf("no cluster name ending in %s collides with another cluster: it need not be reserved", s)
		}
	}
}
