// Package schema tests the EtcdCluster CRD on a real kube-apiserver.
package schema

// The schema tests run the generated CRD on a real kube-apiserver and etcd
// (built from the Go module proxy by `make envtest-assets`) and check what a
// user sees: every example is accepted, every invalid object is rejected with
// the message a user reads, and update rules hold on real updates.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/test/support"
)

var k8sClient client.Client

func TestMain(m *testing.M) {
	_, c, stop, err := support.StartEnvtest(filepath.Join("..", "..", "config", "crd", "bases"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8sClient = c
	code := m.Run()
	stop()
	os.Exit(code)
}

// newNamespace creates a namespace for one test, so tests can run in
// parallel with the names the examples use.
func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "schema-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// createStrict creates obj as `kubectl apply` would: unknown or duplicate
// fields are errors.
func createStrict(ctx context.Context, obj client.Object) error {
	return k8sClient.Create(ctx, obj, &client.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
}

func TestExamplesAreAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var files []string
	for _, pattern := range []string{"../../examples/*.yaml", "../../examples/tenants/*.yaml", "../../examples/backups/*.yaml", "../../config/samples/etcd_*.yaml"} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) < 8 {
		t.Fatalf("found %d example files, want at least 8: %v", len(files), files)
	}
	for _, file := range files {
		if filepath.Base(file) == "k0s.yaml" {
			continue // k0s's own configuration, not a Kubernetes object
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(ctx, t)
			for _, obj := range support.ReadObjects(t, file) {
				obj.SetNamespace(ns)
				if err := createStrict(ctx, obj); err != nil {
					t.Fatalf("%s: %s %q was rejected: %v", file, obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

func TestSeedExampleKeepsEveryField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	objs := support.ReadObjects(t, "../../examples/all-fields-seed.yaml")
	if len(objs) != 1 {
		t.Fatalf("got %d objects, want 1", len(objs))
	}
	sent := objs[0]
	sent.SetNamespace(ns)
	if err := createStrict(ctx, sent.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	got := &etcdv1alpha1.EtcdCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: sent.GetName()}, got); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field string
		ok    bool
	}{
		{"spec.options", got.Spec.Options["max-snapshots"] == "5"},
		{"spec.storage.emptyDir", got.Spec.Storage.EmptyDir != nil},
		{"spec.storage.volumeClaimTemplate", got.Spec.Storage.VolumeClaimTemplate != nil && got.Spec.Storage.VolumeClaimTemplate.Spec.Resources.Requests.Storage().String() == "10Gi"},
		{"spec.podTemplate.metadata", got.Spec.PodTemplate.Labels["env"] == "prod"},
		{"spec.podTemplate.spec.imagePullSecrets", len(got.Spec.PodTemplate.Spec.ImagePullSecrets) == 1},
		{"spec.podTemplate.spec.runtimeClassName", got.Spec.PodTemplate.Spec.RuntimeClassName != nil && *got.Spec.PodTemplate.Spec.RuntimeClassName == "legacy"},
		{"spec.podTemplate.spec.containers", len(got.Spec.PodTemplate.Spec.Containers) == 1 && got.Spec.PodTemplate.Spec.Containers[0].Resources.Limits.Memory().String() == "200Mi"},
		{"spec.serviceTemplate.metadata", got.Spec.ServiceTemplate != nil && got.Spec.ServiceTemplate.Annotations["example.com/annotation"] == "true"},
		{"spec.podDisruptionBudgetTemplate.spec", got.Spec.PodDisruptionBudgetTemplate != nil && got.Spec.PodDisruptionBudgetTemplate.Spec.MinAvailable.IntValue() == 2},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s was not stored as written", c.field)
		}
	}
}

func TestDefaultsAndScale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}}
	if err := createStrict(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if cluster.Spec.Replicas == nil || *cluster.Spec.Replicas != etcdv1alpha1.DefaultReplicas {
		t.Fatalf("spec.replicas = %v, want the default %d", cluster.Spec.Replicas, etcdv1alpha1.DefaultReplicas)
	}

	// The scale subresource is what `kubectl scale` uses.
	scale := &autoscalingv1.Scale{}
	if err := k8sClient.SubResource("scale").Get(ctx, cluster, scale); err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	if scale.Spec.Replicas != 3 {
		t.Fatalf("scale.spec.replicas = %d, want 3", scale.Spec.Replicas)
	}
	scale.Spec.Replicas = 5
	if err := k8sClient.SubResource("scale").Update(ctx, cluster, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scaling to 5: %v", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	if *cluster.Spec.Replicas != 5 {
		t.Fatalf("after scaling, spec.replicas = %d, want 5", *cluster.Spec.Replicas)
	}
	scale.Spec.Replicas = 10
	err := k8sClient.SubResource("scale").Update(ctx, cluster, client.WithSubResourceBody(scale))
	assertRejected(t, err, "spec.replicas: Invalid value: 10: spec.replicas in body should be less than or equal to 9")
}

// invalid is one object the API server must reject, with the message a user
// reads.
type invalid struct {
	name string
	spec string // YAML of spec
	want string // part of the error the API server returns
}

var invalidObjects = []invalid{
	// replicas
	{"zero replicas", `replicas: 0`, "spec.replicas: Invalid value: 0: spec.replicas must be at least 1: scaling to zero would stop every member (and lose all data kept in emptyDirs)"},
	{"negative replicas", `replicas: -1`, "spec.replicas must be at least 1"},
	{"too many replicas", `replicas: 11`, "spec.replicas in body should be less than or equal to 9"},

	// unhealthyMemberTimeout
	{"too short an unhealthy member timeout", `unhealthyMemberTimeout: 5s`, "spec.unhealthyMemberTimeout must be at least 10s"},
	{"an unhealthy member timeout that is no duration", `unhealthyMemberTimeout: soon`, "spec.unhealthyMemberTimeout: Invalid value: \"soon\": spec.unhealthyMemberTimeout in body should match"},

	// options
	{"option with leading dashes", "options: {--election-timeout: '1000'}", "spec.options: Invalid value: spec.options keys are etcd flag names: write them in lower case without the leading dashes, for example election-timeout"},
	{"option in upper case", "options: {Election-Timeout: '1000'}", "spec.options keys are etcd flag names"},
	{"option with a value in the key", "options: {election-timeout=1000: ''}", "spec.options keys are etcd flag names"},
	{"option name", "options: {name: member}", "spec.options: Invalid value: spec.options sets a flag the operator owns (name, data-dir,"},
	{"option the TLS setup owns", "options: {peer-skip-client-san-verification: 'false'}", "spec.options sets a flag the operator owns"},
	{"option that would undo the peer identity check", "options: {peer-cert-allowed-cn: member}", "spec.options sets a flag the operator owns"},
	{"option data-dir", "options: {data-dir: /var/lib/etcd}", "and their peer- forms, peer-skip-client-san-verification, peer-cert-allowed-hostname, peer-cert-allowed-cn): remove it; TLS comes from spec.security and the data directory from spec.storage"},
	{"option initial-cluster", "options: {initial-cluster: a=http://a:2380}", "spec.options sets a flag the operator owns"},
	{"option initial-cluster-state", "options: {initial-cluster-state: existing}", "spec.options sets a flag the operator owns"},
	{"option listen-client-urls", "options: {listen-client-urls: 'http://0.0.0.0:2379'}", "spec.options sets a flag the operator owns"},
	{"option advertise-client-urls", "options: {advertise-client-urls: 'http://a:2379'}", "spec.options sets a flag the operator owns"},
	{"option cert-file", "options: {cert-file: /tls/tls.crt}", "spec.options sets a flag the operator owns"},
	{"option peer-trusted-ca-file", "options: {peer-trusted-ca-file: /tls/ca.crt}", "spec.options sets a flag the operator owns"},
	{"option force-new-cluster", "options: {force-new-cluster: 'true'}", "spec.options sets a flag the operator owns"},
	{"option config-file", "options: {config-file: /etc/etcd.yaml}", "spec.options sets a flag the operator owns"},
	{"option unsafe-no-fsync", "options: {unsafe-no-fsync: 'true'}", "spec.options: Invalid value: spec.options sets unsafe-no-fsync: without fsync a member that loses power loses writes it has acknowledged and can come back disagreeing with its peers; remove it"},
	{"option unsafe-no-fsync set to false", "options: {unsafe-no-fsync: 'false'}", "spec.options sets unsafe-no-fsync"},

	// storage
	{"claim without a size", "storage: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce]}}}", "spec.storage.volumeClaimTemplate.spec.resources.requests.storage is required: set the size of each member's volume"},
	{"claim with requests but no storage", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {cpu: 1}}}}}", "spec.storage.volumeClaimTemplate.spec.resources.requests.storage is required"},
	{"claim with no spec", "storage: {volumeClaimTemplate: {metadata: {labels: {a: b}}}}", `spec.storage.volumeClaimTemplate.spec: Required value`},
	{"claim of 1Ki", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Ki}}}}}", "spec.storage.volumeClaimTemplate: Invalid value: spec.storage.volumeClaimTemplate.spec.resources.requests.storage 1Ki is too small for an etcd member, which keeps up to six 64 MB write-ahead log files besides its database: request at least 512Mi"},
	{"claim just under the minimum", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 511Mi}}}}}", "requests.storage 511Mi is too small for an etcd member"},
	{"claim in bytes under the minimum", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 536870911}}}}}", "requests.storage 536870911 is too small for an etcd member"},
	{"emptyDir of 1Ki", "storage: {emptyDir: {sizeLimit: 1Ki}}", "spec.storage.emptyDir: Invalid value: spec.storage.emptyDir.sizeLimit 1Ki is too small for an etcd member, which keeps up to six 64 MB write-ahead log files besides its database: set at least 512Mi, or leave sizeLimit out"},
	{"emptyDir just under the minimum", "storage: {emptyDir: {medium: Memory, sizeLimit: 536M}}", "spec.storage.emptyDir.sizeLimit 536M is too small for an etcd member"},
	{"emptyDir of zero", "storage: {emptyDir: {sizeLimit: 0}}", "spec.storage.emptyDir.sizeLimit 0 is too small for an etcd member"},

	// podDisruptionBudgetTemplate
	{"budgets that disagree", "podDisruptionBudgetTemplate: {spec: {minAvailable: 2, maxUnavailable: 2}}", "spec.podDisruptionBudgetTemplate.spec: minAvailable and maxUnavailable are both set but do not add up to spec.replicas; set only one of them"},
	{"both budgets as percentages", "podDisruptionBudgetTemplate: {spec: {minAvailable: 50%, maxUnavailable: 50%}}", "minAvailable and maxUnavailable are both set but do not add up to spec.replicas"},
	{"minAvailable over replicas", "podDisruptionBudgetTemplate: {spec: {minAvailable: 4}}", "spec.podDisruptionBudgetTemplate.spec.minAvailable is more than spec.replicas: set at most spec.replicas"},
	{"maxUnavailable over replicas", "{replicas: 5, podDisruptionBudgetTemplate: {spec: {maxUnavailable: 6}}}", "spec.podDisruptionBudgetTemplate.spec.maxUnavailable is more than spec.replicas"},
	{"minAvailable over 100%", "podDisruptionBudgetTemplate: {spec: {minAvailable: 150%}}", "spec.podDisruptionBudgetTemplate.spec.minAvailable must be a non-negative number or a percentage from 0% to 100%"},
	{"negative maxUnavailable", "podDisruptionBudgetTemplate: {spec: {maxUnavailable: -1}}", "spec.podDisruptionBudgetTemplate.spec.maxUnavailable must be a non-negative number or a percentage"},
	{"minAvailable as a word", "podDisruptionBudgetTemplate: {spec: {minAvailable: two}}", "spec.podDisruptionBudgetTemplate.spec.minAvailable must be a non-negative number or a percentage"},

	// security
	{"peer certificate without its CA", "security: {tls: {peerSecret: peer}}", "spec.security.tls: peerSecret and peerTrustedCASecret go together: set both"},
	{"peer CA without a certificate", "security: {tls: {peerTrustedCASecret: peer-ca}}", "peerSecret and peerTrustedCASecret go together"},
	{"server certificate without its CA", "security: {tls: {serverSecret: server}}", "spec.security.tls: serverSecret and serverTrustedCASecret go together"},
	{"client certificate without its CA", "security: {tls: {serverSecret: s, serverTrustedCASecret: s-ca, clientSecret: client}}", "spec.security.tls: clientSecret and clientTrustedCASecret go together"},
	{"client certificates without server TLS", "security: {tls: {clientSecret: c, clientTrustedCASecret: c-ca}}", "spec.security.tls: client certificates need TLS on the client port: set serverSecret and serverTrustedCASecret too"},
	{"secret name with upper case", "security: {tls: {peerSecret: Peer_TLS, peerTrustedCASecret: peer-ca}}", "spec.security.tls.peerSecret: Invalid value: \"Peer_TLS\": must be the name of a Secret in the cluster's namespace"},
	{"cert-manager and user Secrets together", "security: {tls: {certManager: {}, serverSecret: s, serverTrustedCASecret: s-ca}}", "spec.security.tls: certManager and the user-provided Secret fields (peerSecret, peerTrustedCASecret, serverSecret, serverTrustedCASecret, clientSecret, clientTrustedCASecret) exclude each other: remove certManager to bring your own certificates, or remove the Secret fields"},
	{"issuerRef without a name", "security: {tls: {certManager: {issuerRef: {kind: ClusterIssuer}}}}", "spec.security.tls.certManager.issuerRef.name: Required value"},
	{"cert-manager issuer of another kind", "security: {tls: {certManager: {issuerRef: {name: ca, kind: Certificate}}}}", "kind of a cert-manager.io issuer is Issuer (in the cluster's namespace) or ClusterIssuer"},
	{"peer issuer of another kind", "security: {tls: {certManager: {peerIssuerRef: {name: ca, kind: Secret, group: cert-manager.io}}}}", "spec.security.tls.certManager.peerIssuerRef: Invalid value: kind of a cert-manager.io issuer is Issuer"},

	// podTemplate
	{"operator label on pods", "podTemplate: {metadata: {labels: {etcd.aenix.io/member: x}}}", "spec.podTemplate.metadata.labels: keys with the etcd.aenix.io/ prefix are set by the operator"},
	{"etcd container with a command", "podTemplate: {spec: {containers: [{name: etcd, command: [sh]}]}}", "the etcd container's command and args are set by the operator: remove them and put etcd flags in spec.options"},
	{"etcd container with args", "podTemplate: {spec: {containers: [{name: etcd, args: [--debug]}]}}", "the etcd container's command and args are set by the operator"},
	{"sidecar without an image", "podTemplate: {spec: {containers: [{name: etcd}, {name: backup}]}}", "spec.podTemplate.spec.containers: Invalid value: every container other than etcd is a sidecar and needs an image"},
	{"two containers with one name", "podTemplate: {spec: {containers: [{name: etcd}, {name: etcd}]}}", `spec.podTemplate.spec.containers[1]: Duplicate value: {"name":"etcd"}`},
	{"container without a name", "podTemplate: {spec: {containers: [{image: busybox}]}}", "spec.podTemplate.spec.containers[0].name: Required value"},
	{"etcd container forcing a new cluster through env", "podTemplate: {spec: {containers: [{name: etcd, env: [{name: ETCD_FORCE_NEW_CLUSTER, value: 'true'}]}]}}", "spec.podTemplate.spec.containers[0]: Invalid value: the etcd container's env sets a variable starting with ETCD_: etcd reads ETCD_<FLAG> variables as flags, around the checks on spec.options and the flags the operator sets; remove it and put etcd flags in spec.options"},
	{"etcd container env names every ETCD_ variable", "podTemplate: {spec: {containers: [{name: etcd, env: [{name: GOMAXPROCS, value: '2'}, {name: ETCD_UNSAFE_NO_FSYNC, value: 'true'}, {name: ETCD_DATA_DIR, value: /tmp}]}]}}", "the etcd container's env sets a variable starting with ETCD_"},
	{"etcd container env from a Secret", "podTemplate: {spec: {containers: [{name: etcd, env: [{name: ETCD_INITIAL_CLUSTER, valueFrom: {secretKeyRef: {name: s, key: k}}}]}]}}", "the etcd container's env sets a variable starting with ETCD_"},
	{"etcd container envFrom without a prefix", "podTemplate: {spec: {containers: [{name: etcd, envFrom: [{configMapRef: {name: etcd-env}}]}]}}", "spec.podTemplate.spec.containers[0]: Invalid value: the etcd container's envFrom could set variables starting with ETCD_, which etcd reads as flags around the checks on spec.options: give every envFrom entry a prefix that cannot begin a name with ETCD_ (for example APP_), or list the variables in env"},
	{"etcd container envFrom with an empty prefix", "podTemplate: {spec: {containers: [{name: etcd, envFrom: [{prefix: '', secretRef: {name: etcd-env}}]}]}}", "the etcd container's envFrom could set variables starting with ETCD_"},
	{"etcd container envFrom with the ETCD_ prefix", "podTemplate: {spec: {containers: [{name: etcd, envFrom: [{prefix: ETCD_, configMapRef: {name: etcd-env}}]}]}}", "the etcd container's envFrom could set variables starting with ETCD_"},
	{"etcd container envFrom with a prefix that begins ETCD_", "podTemplate: {spec: {containers: [{name: etcd, envFrom: [{prefix: ETC, configMapRef: {name: etcd-env}}]}]}}", "the etcd container's envFrom could set variables starting with ETCD_"},
	{"etcd container mounting over the data directory", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/etcd}]}]}}", "spec.podTemplate.spec.containers[0]: Invalid value: the etcd container mounts a volume at, inside or above /var/lib/etcd, the data directory the operator mounts from spec.storage: etcd would keep its data elsewhere than the member's volume; mount it at another path"},
	{"etcd container mounting inside the data directory", "podTemplate: {spec: {volumes: [{name: wal, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: wal, mountPath: /var/lib/etcd/member/wal}]}]}}", "the etcd container mounts a volume at, inside or above /var/lib/etcd"},
	{"etcd container mounting above the data directory", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib}]}]}}", "the etcd container mounts a volume at, inside or above /var/lib/etcd"},
	{"etcd container mounting at the root", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /}]}]}}", "the etcd container mounts a volume at, inside or above /var/lib/etcd"},
	{"etcd container mounting the data directory with a trailing slash", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/etcd/}]}]}}", "the etcd container mounts a volume at, inside or above /var/lib/etcd"},
	{"etcd container mounting the data directory by a relative path", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: var/lib/etcd}]}]}}", "write each mountPath as a clean absolute path"},
	{"etcd container mounting by a doubled slash", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var//lib/etcd}]}]}}", "spec.podTemplate.spec.containers[0]: Invalid value: the etcd container's volumeMounts: write each mountPath as a clean absolute path (starting with /, without //, . or ..) so that it cannot reach the data directory /var/lib/etcd by another spelling"},
	{"etcd container mounting through ..", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/x/../etcd}]}]}}", "write each mountPath as a clean absolute path"},
	{"etcd container mounting at a path ending in ..", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/etcd/member/..}]}]}}", "the etcd container mounts a volume at, inside or above /var/lib/etcd"},
	{"etcd container mounting at a path ending in /..", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/etcd-x/..}]}]}}", "write each mountPath as a clean absolute path"},
	{"sidecar first, then the etcd container with ETCD_ env", "podTemplate: {spec: {containers: [{name: backup, image: busybox}, {name: etcd, env: [{name: ETCD_SNAPSHOT_COUNT, value: '1'}]}]}}", "spec.podTemplate.spec.containers[1]: Invalid value: the etcd container's env sets a variable starting with ETCD_"},
	{"etcd container mounting through .", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/./etcd}]}]}}", "write each mountPath as a clean absolute path"},
	{"volume with a reserved name", "podTemplate: {spec: {volumes: [{name: etcd-data, emptyDir: {}}]}}", "spec.podTemplate.spec.volumes: Invalid value: volume names starting with etcd- are reserved for the operator's volumes: rename the volume"},
	{"negative grace period", "podTemplate: {spec: {terminationGracePeriodSeconds: -5}}", "spec.podTemplate.spec.terminationGracePeriodSeconds in body should be greater than or equal to 0"},

	// serviceTemplate
	{"service with a selector", "serviceTemplate: {spec: {selector: {app: other}}}", "spec.serviceTemplate.spec.selector is set by the operator to select the cluster's members: remove it"},
	{"ExternalName service", "serviceTemplate: {spec: {type: ExternalName, externalName: example.com}}", "spec.serviceTemplate.spec.type: an ExternalName Service cannot front the cluster's members"},

	// unknown fields are errors, as with kubectl apply
	{"misspelled field", "replica: 3", `unknown field "spec.replica"`},
}

// validObjects are specs just inside the limits of a rule: the API server
// must accept them.
var validObjects = []struct{ name, spec string }{
	{"an option that only sounds unsafe", "options: {experimental-initial-corrupt-check: 'true'}"},
	{"claim of the minimum", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 512Mi}}}}}"},
	{"claim of the minimum in bytes", "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 536870912}}}}}"},
	{"emptyDir of the minimum", "storage: {emptyDir: {medium: Memory, sizeLimit: 512Mi}}"},
	{"emptyDir without a limit", "storage: {emptyDir: {}}"},
	{"etcd container env that is no flag", "podTemplate: {spec: {containers: [{name: etcd, env: [{name: GOMAXPROCS, value: '2'}, {name: ETCDCTL_API, value: '3'}, {name: ETCD_UNSUPPORTED_ARCH, value: riscv64}, {name: etcd_lower, value: x}]}]}}"},
	{"sidecar env with ETCD_ names", "podTemplate: {spec: {containers: [{name: backup, image: busybox, env: [{name: ETCD_DATA_DIR, value: /var/lib/etcd}]}]}}"},
	{"etcd container envFrom with a safe prefix", "podTemplate: {spec: {containers: [{name: etcd, envFrom: [{prefix: APP_, configMapRef: {name: env}}, {prefix: ETCDX, secretRef: {name: env}}]}]}}"},
	{"sidecar envFrom without a prefix", "podTemplate: {spec: {containers: [{name: backup, image: busybox, envFrom: [{configMapRef: {name: env}}]}]}}"},
	{"etcd container mounts beside the data directory", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}, {name: more, emptyDir: {}}], containers: [{name: etcd, volumeMounts: [{name: other, mountPath: /var/lib/etcd-backup}, {name: more, mountPath: /etc/etcd/}]}]}}"},
	{"sidecar mounting the data directory path", "podTemplate: {spec: {volumes: [{name: other, emptyDir: {}}], containers: [{name: backup, image: busybox, volumeMounts: [{name: other, mountPath: /var/lib/etcd}]}]}}"},
}

func TestValidObjectsAreAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for i, tt := range validObjects {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := createStrict(ctx, clusterFromSpec(t, ns, fmt.Sprintf("valid-%d", i), tt.spec)); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestClusterNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	longest := strings.Repeat("a", etcdv1alpha1.MaxClusterNameLength)
	for _, name := range []string{"a", "etcd-main", longest, "peer", "headless", "foo-peers", "foo-headless1", "foo-peer-ca"} {
		if err := createStrict(ctx, clusterFromSpec(t, ns, name, "replicas: 1")); err != nil {
			t.Errorf("name %q was rejected: %v", name, err)
		}
	}
	for _, name := range []string{"1etcd", longest + "a", "etcd.main"} {
		err := createStrict(ctx, clusterFromSpec(t, ns, name, "replicas: 1"))
		assertRejected(t, err, "metadata.name must start with a letter, hold only lower case letters, digits and '-', and be at most 50 characters")
	}
	for _, suffix := range etcdv1alpha1.ReservedClusterNameSuffixes {
		err := createStrict(ctx, clusterFromSpec(t, ns, "foo"+suffix, "replicas: 1"))
		assertRejected(t, err, "metadata.name must not end in -headless or -peer: the operator names the objects of the cluster without that ending so (<name>-headless is its headless Service, <name>-peer-ca its peer CA), and this cluster would take them over; choose another name")
	}
}

func TestInvalidObjectsAreRejected(t *testing.T) {
	t.Parallel()
	if len(invalidObjects) < 30 {
		t.Fatalf("the table has %d rows; keep at least 30", len(invalidObjects))
	}
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for i, tt := range invalidObjects {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := clusterFromSpec(t, ns, fmt.Sprintf("invalid-%d", i), tt.spec)
			assertRejected(t, createStrict(ctx, obj), tt.want)
		})
	}
}

// update is a change to an accepted object that the API server must accept
// or reject.
type update struct {
	name   string
	before string // YAML of spec at creation
	after  string // YAML of spec in the update
	want   string // part of the error; empty when the update is accepted
}

var updates = []update{
	{
		name:   "emptyDir to volumeClaimTemplate",
		before: "storage: {emptyDir: {}}",
		after:  "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		want:   "spec.storage: the storage kind (emptyDir or volumeClaimTemplate) cannot change on an existing cluster; create a new EtcdCluster with the storage you want and move the data to it",
	},
	{
		name:   "no storage to volumeClaimTemplate",
		before: "replicas: 3",
		after:  "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		want:   "the storage kind (emptyDir or volumeClaimTemplate) cannot change",
	},
	{
		name:   "volumeClaimTemplate to emptyDir",
		before: "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		after:  "storage: {emptyDir: {}}",
		want:   "the storage kind (emptyDir or volumeClaimTemplate) cannot change",
	},
	{
		name:   "volume shrinks",
		before: "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 10Gi}}}}}",
		after:  "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 5Gi}}}}}",
		want:   "spec.storage.volumeClaimTemplate.spec.resources.requests.storage cannot shrink from 10Gi to 5Gi: volumes only grow; keep the size or make it larger",
	},
	{
		name:   "volume shrinks in other units",
		before: "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		after:  "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1000Mi}}}}}",
		want:   "cannot shrink from 1Gi to 1000Mi",
	},
	{
		name:   "volume grows",
		before: "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		after:  "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 2Gi}}}}}",
	},
	{
		name:   "emptyDir added beside volumeClaimTemplate",
		before: "storage: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
		after:  "storage: {emptyDir: {}, volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}",
	},
	{
		name:   "scale with an agreeing budget",
		before: "{replicas: 3, podDisruptionBudgetTemplate: {spec: {minAvailable: 2, maxUnavailable: 1}}}",
		after:  "{replicas: 5, podDisruptionBudgetTemplate: {spec: {minAvailable: 2, maxUnavailable: 1}}}",
		want:   "minAvailable and maxUnavailable are both set but do not add up to spec.replicas",
	},
	{
		name:   "scale below minAvailable",
		before: "{replicas: 5, podDisruptionBudgetTemplate: {spec: {minAvailable: 4}}}",
		after:  "{replicas: 3, podDisruptionBudgetTemplate: {spec: {minAvailable: 4}}}",
		want:   "spec.podDisruptionBudgetTemplate.spec.minAvailable is more than spec.replicas",
	},
	{
		name:   "TLS added",
		before: "replicas: 3",
		after:  "{replicas: 3, security: {tls: {certManager: {}}}}",
		want:   "spec.security.tls cannot be added to or removed from an existing cluster: the operator does not roll TLS changes member by member yet",
	},
	{
		name:   "TLS removed",
		before: "security: {tls: {serverSecret: s, serverTrustedCASecret: s-ca}}",
		after:  "security: {enableAuth: false}",
		want:   "spec.security.tls cannot be added to or removed from an existing cluster",
	},
	{
		name:   "TLS mode changed",
		before: "security: {tls: {serverSecret: s, serverTrustedCASecret: s-ca}}",
		after:  "security: {tls: {certManager: {}}}",
		want:   "spec.security.tls cannot change on an existing cluster, apart from the issuers of certManager: the operator does not roll TLS changes member by member yet",
	},
	{
		name:   "TLS mode changed the other way",
		before: "security: {tls: {certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}}}",
		after:  "security: {tls: {peerSecret: p, peerTrustedCASecret: p-ca}}",
		want:   "spec.security.tls cannot change on an existing cluster, apart from the issuers of certManager",
	},
	{
		// The cluster's own CA is reissued by the new issuer and rolled
		// out like a renewed CA (internal/pki/trust.go).
		name:   "issuer given to a cluster with self-signed CAs",
		before: "security: {tls: {certManager: {}}}",
		after:  "security: {tls: {certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}}}",
	},
	{
		name:   "peer issuer changed, client issuer removed",
		before: "security: {tls: {certManager: {issuerRef: {name: corp-ca}, peerIssuerRef: {name: peers}}}}",
		after:  "security: {tls: {certManager: {peerIssuerRef: {name: other-peers, kind: ClusterIssuer}}}}",
	},
	{
		name:   "scale a managed-TLS cluster",
		before: "{replicas: 3, security: {tls: {certManager: {issuerRef: {name: corp-ca}}}}}",
		after:  "{replicas: 5, security: {tls: {certManager: {issuerRef: {name: corp-ca}}}}}",
	},
	{
		name:   "auth turned on without TLS (root gets a password)",
		before: "replicas: 3",
		after:  "{replicas: 3, security: {enableAuth: true}}",
	},
	{
		name:   "options and scale change",
		before: "{replicas: 3, options: {election-timeout: '1000'}}",
		after:  "{replicas: 5, options: {election-timeout: '2000', heartbeat-interval: '200'}}",
	},
}

func TestUpdateRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for i, tt := range updates {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := clusterFromSpec(t, ns, fmt.Sprintf("update-%d", i), tt.before)
			if err := createStrict(ctx, obj); err != nil {
				t.Fatalf("creating: %v", err)
			}
			changed := clusterFromSpec(t, ns, obj.GetName(), tt.after)
			changed.SetResourceVersion(obj.GetResourceVersion())
			err := k8sClient.Update(ctx, changed, &client.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("update rejected: %v", err)
				}
				return
			}
			assertRejected(t, err, tt.want)
		})
	}
}

// TestTenantRules checks what the API server refuses of an EtcdTenant, at
// creation and on update.
func TestTenantRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	tenant := func(name, spec string) *unstructured.Unstructured {
		obj := clusterFromSpec(t, ns, name, spec)
		obj.SetKind("EtcdTenant")
		return obj
	}
	longest := strings.Repeat("t", etcdv1alpha1.MaxTenantNameLength)
	for _, name := range []string{longest, "k0s.control-plane"} {
		if err := createStrict(ctx, tenant(name, "{clusterName: shared}")); err != nil {
			t.Errorf("tenant name %q was rejected: %v", name, err)
		}
	}
	assertRejected(t, createStrict(ctx, tenant(longest+"t", "{clusterName: shared}")),
		"metadata.name must be at most 57 characters: the tenant's etcd user is tenant-<name>, the common name of its client certificate, which holds at most 64 characters")
	for i, tt := range []struct{ spec, want string }{
		{"{}", "spec.clusterName: Required value"},
		{"{clusterName: shared, prefix: tenant/}", "spec.prefix must start and end with \"/\""},
		{"{clusterName: shared, prefix: /tenant}", "spec.prefix must start and end with \"/\""},
		{"{clusterName: shared, prefix: /}", "spec.prefix must start and end with \"/\" and name something"},
		{"{clusterName: shared, retentionPolicy: Forget}", "spec.retentionPolicy: Unsupported value: \"Forget\""},
	} {
		assertRejected(t, createStrict(ctx, tenant(fmt.Sprintf("invalid-%d", i), tt.spec)), tt.want)
	}
	for i, tt := range []struct{ before, after, want string }{
		{"{clusterName: shared}", "{clusterName: other}", "spec.clusterName cannot change"},
		{"{clusterName: shared}", "{clusterName: shared, prefix: /elsewhere/}", "spec.prefix cannot change"},
		{"{clusterName: shared, prefix: /a/}", "{clusterName: shared, prefix: /b/}", "spec.prefix cannot change"},
		{"{clusterName: shared}", "{clusterName: shared, password: true}", "spec.password cannot change"},
		{"{clusterName: shared}", "{clusterName: shared, retentionPolicy: Delete}", ""},
	} {
		obj := tenant(fmt.Sprintf("update-%d", i), tt.before)
		if err := createStrict(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", tt.before, err)
		}
		changed := tenant(obj.GetName(), tt.after)
		changed.SetResourceVersion(obj.GetResourceVersion())
		err := k8sClient.Update(ctx, changed, &client.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s -> %s rejected: %v", tt.before, tt.after, err)
			}
			continue
		}
		assertRejected(t, err, tt.want)
	}
}

// TestBackupRules checks what the API server refuses of an EtcdBackup.
func TestBackupRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	backup := func(name, spec string) *unstructured.Unstructured {
		obj := clusterFromSpec(t, ns, name, spec)
		obj.SetKind("EtcdBackup")
		return obj
	}
	const s3 = "{clusterName: db, destination: {s3: {endpoint: 'https://s3.example:9000', bucket: bkp, credentialsSecret: {name: s3}}}}"
	for i, spec := range []string{
		s3,
		"{clusterName: db, destination: {s3: {endpoint: 'http://minio.storage.svc', bucket: my.bucket-1, prefix: etcd/prod, region: eu-west-1, addressing: Path, credentialsSecret: {name: s3}, caSecret: {name: ca}}}, deletionPolicy: Delete, timeout: 10m, backoffLimit: 2}",
		"{clusterName: db, destination: {volume: {claimName: backups, path: etcd/nightly}}}",
	} {
		if err := createStrict(ctx, backup(fmt.Sprintf("valid-%d", i), spec)); err != nil {
			t.Errorf("%s was rejected: %v", spec, err)
		}
	}
	assertRejected(t, createStrict(ctx, backup(strings.Repeat("b", 53), s3)), "metadata.name must be at most 52 characters")
	for i, tt := range []struct{ spec, want string }{
		{"{clusterName: db, destination: {}}", "spec.destination: set exactly one of s3 and volume"},
		{"{clusterName: db, destination: {volume: {claimName: c}, s3: {endpoint: 'https://s3', bucket: bkp, credentialsSecret: {name: s3}}}}", "spec.destination: set exactly one of s3 and volume"},
		{"{clusterName: db, destination: {s3: {endpoint: 's3.example', bucket: bkp, credentialsSecret: {name: s3}}}}", "spec.destination.s3.endpoint must be an http or https URL"},
		{"{clusterName: db, destination: {s3: {endpoint: 'https://s3.example/bucket', bucket: bkp, credentialsSecret: {name: s3}}}}", "spec.destination.s3.endpoint must be an http or https URL with a host and no path"},
		{"{clusterName: db, destination: {s3: {endpoint: 'https://s3', bucket: Bkp, credentialsSecret: {name: s3}}}}", "spec.destination.s3.bucket"},
		{"{clusterName: db, destination: {s3: {endpoint: 'https://s3', bucket: bkp, prefix: /etcd/, credentialsSecret: {name: s3}}}}", "spec.destination.s3.prefix must not start or end with /"},
		{"{clusterName: db, destination: {s3: {endpoint: 'https://s3', bucket: bkp}}}", "spec.destination.s3.credentialsSecret: Required value"},
		{"{clusterName: db, destination: {volume: {claimName: c, path: ../x}}}", "spec.destination.volume.path must be relative"},
		{"{clusterName: db, destination: {volume: {claimName: c, path: /x}}}", "spec.destination.volume.path must be relative"},
		{"{clusterName: db, destination: {volume: {claimName: c}}, deletionPolicy: Keep}", "spec.deletionPolicy: Unsupported value"},
		{"{destination: {volume: {claimName: c}}}", "spec.clusterName: Required value"},
	} {
		assertRejected(t, createStrict(ctx, backup(fmt.Sprintf("invalid-%d", i), tt.spec)), tt.want)
	}
	obj := backup("immutable", s3)
	if err := createStrict(ctx, obj); err != nil {
		t.Fatal(err)
	}
	changed := backup("immutable", "{clusterName: other, destination: {s3: {endpoint: 'https://s3.example:9000', bucket: bkp, credentialsSecret: {name: s3}}}}")
	changed.SetResourceVersion(obj.GetResourceVersion())
	assertRejected(t, k8sClient.Update(ctx, changed, &client.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}), "spec of an EtcdBackup cannot change")

	schedule := func(name, spec string) *unstructured.Unstructured {
		obj := clusterFromSpec(t, ns, name, spec)
		obj.SetKind("EtcdBackupSchedule")
		return obj
	}
	const daily = "{clusterName: db, schedule: '0 3 * * *', timeZone: Europe/Berlin, retention: {keepLast: 7, maxAge: 720h}, destination: {volume: {claimName: backups}}}"
	if err := createStrict(ctx, schedule("daily", daily)); err != nil {
		t.Errorf("%s was rejected: %v", daily, err)
	}
	if err := createStrict(ctx, schedule("hourly", "{clusterName: db, schedule: '@hourly', destination: {volume: {claimName: backups}}}")); err != nil {
		t.Errorf("@hourly was rejected: %v", err)
	}
	assertRejected(t, createStrict(ctx, schedule(strings.Repeat("s", 44), daily)), "metadata.name must be at most 43 characters")
	for i, tt := range []struct{ spec, want string }{
		{"{clusterName: db, schedule: '0 3 * *', destination: {volume: {claimName: backups}}}", "spec.schedule needs five fields"},
		{"{clusterName: db, schedule: '0 3 * * *', retention: {keepLast: 0}, destination: {volume: {claimName: backups}}}", "spec.retention.keepLast"},
		{"{clusterName: db, schedule: '0 3 * * *', destination: {}}", "spec.destination: set exactly one of s3 and volume"},
	} {
		assertRejected(t, createStrict(ctx, schedule(fmt.Sprintf("invalid-%d", i), tt.spec)), tt.want)
	}
}

// clusterFromSpec builds an EtcdCluster named name whose spec is the YAML
// in spec.
func clusterFromSpec(t *testing.T, namespace, name, spec string) *unstructured.Unstructured {
	t.Helper()
	specMap := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec), &specMap); err != nil {
		t.Fatalf("spec %q: %v", spec, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": specMap}}
	obj.SetGroupVersionKind(etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func assertRejected(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejected with %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("rejected with:\n  %v\nwant the message to contain:\n  %s", err, want)
	}
}

// TestOnlyClustersAnswerToEtcd: `kubectl get etcd simple` and `kubectl
// scale etcd simple` name the EtcdCluster: no other kind may take the
// short name or category etcd, which would make kubectl resolve "etcd" to
// several resources and refuse a name.
func TestOnlyClustersAnswerToEtcd(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("CRDs %v, %v", files, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names struct {
					Kind       string   `json:"kind"`
					ShortNames []string `json:"shortNames"`
					Categories []string `json:"categories"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		n := crd.Spec.Names
		claims := slices.Contains(n.ShortNames, "etcd") || slices.Contains(n.Categories, "etcd")
		if claims != (n.Kind == "EtcdCluster") {
			t.Errorf("%s: short names %v, categories %v: only EtcdCluster answers to etcd", n.Kind, n.ShortNames, n.Categories)
		}
	}
}
