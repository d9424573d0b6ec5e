package builder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func (w *clusterWrapper) withPodTemplate(tmpl etcdv1alpha1.PodTemplate) *clusterWrapper {
	w.Spec.PodTemplate = tmpl
	return w
}

func (w *clusterWrapper) withStorage(s etcdv1alpha1.StorageSpec) *clusterWrapper {
	w.Spec.Storage = s
	return w
}

func (w *clusterWrapper) withOptions(o map[string]string) *clusterWrapper {
	w.Spec.Options = o
	return w
}

var seedMember = Member{Name: "a-0", ClusterState: ClusterStateNew, InitialCluster: "a-0=http://a-0.a-headless.ns.svc:2380"}

func TestMemberPodIdentity(t *testing.T) {
	t.Parallel()
	c := newCluster("a").withNamespace("ns").obj()
	pod := MemberPod(c, seedMember)
	checkEqual(t, pod.Name, "a-0")
	checkEqual(t, pod.Namespace, "ns")
	checkEqual(t, pod.Spec.Hostname, "a-0")
	checkEqual(t, pod.Spec.Subdomain, "a-headless")
	checkEqual(t, pod.Labels[etcdv1alpha1.LabelMember], "a-0")
	checkEqual(t, pod.Labels[etcdv1alpha1.LabelCluster], "a")
	checkEqual(t, pod.OwnerReferences, wantOwner("a"))
	checkEqual(t, *pod.Spec.EnableServiceLinks, false)
	etcd := pod.Spec.Containers[0]
	checkEqual(t, etcd.Name, EtcdContainerName)
	checkEqual(t, etcd.Image, DefaultEtcdImage)
	for _, want := range []string{
		"--name=a-0",
		"--data-dir=/var/lib/etcd",
		"--initial-advertise-peer-urls=http://a-0.a-headless.ns.svc:2380",
		"--advertise-client-urls=http://a-0.a-headless.ns.svc:2379",
		"--initial-cluster-token=a-uid",
		"--listen-metrics-urls=http://0.0.0.0:2381",
	} {
		if !slices.Contains(etcd.Args, want) {
			t.Errorf("args %v lack %s", etcd.Args, want)
		}
	}
	// The state comes from an annotation the operator turns to "existing"
	// once the cluster formed; a flag would keep "new" for good.
	checkEqual(t, pod.Annotations[etcdv1alpha1.AnnotationInitialClusterState], "new")
	checkEqual(t, etcd.Env[0].Name, "ETCD_INITIAL_CLUSTER_STATE")
	checkEqual(t, etcd.Env[0].ValueFrom.FieldRef.FieldPath, "metadata.annotations['etcd.aenix.io/initial-cluster-state']")
	// So do the members: the operator keeps them to the member list, for
	// a member whose data is lost to rejoin.
	checkEqual(t, pod.Annotations[etcdv1alpha1.AnnotationInitialCluster], "a-0=http://a-0.a-headless.ns.svc:2380")
	checkEqual(t, etcd.Env[1].Name, "ETCD_INITIAL_CLUSTER")
	checkEqual(t, etcd.Env[1].ValueFrom.FieldRef.FieldPath, "metadata.annotations['etcd.aenix.io/initial-cluster']")
	checkEqual(t, InitialClusterOf(pod), "a-0=http://a-0.a-headless.ns.svc:2380")
	for _, a := range etcd.Args {
		if strings.HasPrefix(a, "--initial-cluster=") || strings.HasPrefix(a, "--initial-cluster-state") {
			t.Errorf("args set %s", a)
		}
	}
	checkEqual(t, etcd.LivenessProbe.HTTPGet.Path, "/livez")
	checkEqual(t, etcd.ReadinessProbe.HTTPGet.Path, "/readyz")
	checkEqual(t, etcd.VolumeMounts, []corev1.VolumeMount{{Name: DataVolumeName, MountPath: DataDir}})
}

// TestLivenessSpansADefragmentation: etcd's /livez fails while the
// member defragments, so the kubelet must not restart it sooner than the
// defragmentation of a full database may take.
func TestLivenessSpansADefragmentation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		quota    string
		failures int32
		atLeastS int64
	}{
		{"", 21, 204},           // etcd's 2 GiB at 10 MiB/s
		{"8589934592", 82, 819}, // 8 GiB, etcd's largest
		{"16777216", 6, 60},     // 16 MiB: the budget's minute
	} {
		c := newCluster("a").obj()
		if tc.quota != "" {
			c.Spec.Options = map[string]string{"quota-backend-bytes": tc.quota}
		}
		p := MemberPod(c, seedMember).Spec.Containers[0].LivenessProbe
		tolerated := int64(p.PeriodSeconds) * int64(p.FailureThreshold)
		if p.FailureThreshold != tc.failures || tolerated < tc.atLeastS || tolerated < int64(c.DefragmentBudget().Seconds()) {
			t.Errorf("quota %q: liveness %d failures every %d s (%d s), want %d failures, at least %d s and the defragmentation budget %s",
				tc.quota, p.FailureThreshold, p.PeriodSeconds, tolerated, tc.failures, tc.atLeastS, c.DefragmentBudget())
		}
	}
}

func TestClusterToken(t *testing.T) {
	t.Parallel()
	c := newCluster("a").obj()
	checkEqual(t, ClusterToken(c), "a-uid")
	c.Annotations = map[string]string{etcdv1alpha1.AnnotationStartEmpty: "519f2b79ce64f25"}
	checkEqual(t, ClusterToken(c), "a-uid-after-519f2b79ce64f25")
}

func TestMemberPodOptionsAreSortedFlags(t *testing.T) {
	t.Parallel()
	c := newCluster("a").withOptions(map[string]string{"max-wals": "5", "election-timeout": "1000"}).obj()
	args := MemberPod(c, seedMember).Spec.Containers[0].Args
	tail := args[len(args)-2:]
	checkEqual(t, tail, []string{"--election-timeout=1000", "--max-wals=5"})
}

// TestMemberPodCompaction checks that members compact their history by
// default (etcd does not), and that spec.options setting either
// auto-compaction flag leaves both to the user.
func TestMemberPodCompaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		options map[string]string
		want    []string
	}{
		{"default", nil, []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m"}},
		{"other options keep the default", map[string]string{"election-timeout": "1000"}, []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m"}},
		{"the user's retention", map[string]string{"auto-compaction-retention": "1h"}, []string{"--auto-compaction-retention=1h"}},
		{"the user's mode alone", map[string]string{"auto-compaction-mode": "revision"}, []string{"--auto-compaction-mode=revision"}},
		{"both the user's", map[string]string{"auto-compaction-mode": "revision", "auto-compaction-retention": "1000"}, []string{"--auto-compaction-mode=revision", "--auto-compaction-retention=1000"}},
		{"turned off", map[string]string{"auto-compaction-retention": "0"}, []string{"--auto-compaction-retention=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := MemberPod(newCluster("a").withOptions(tt.options).obj(), seedMember).Spec.Containers[0].Args
			var got []string
			for _, a := range args {
				if strings.HasPrefix(a, "--auto-compaction-") {
					got = append(got, a)
				}
			}
			checkEqual(t, got, tt.want)
		})
	}
}

// TestMemberPodQuotaFitsTheVolume: on a bounded volume the database's
// quota leaves room for etcd's write-ahead log files and a second copy
// of the database, so a growing database raises NOSPACE (which the
// operator clears) before the volume fills up (which crashes the member).
func TestMemberPodQuotaFitsTheVolume(t *testing.T) {
	t.Parallel()
	claim := func(size string) etcdv1alpha1.StorageSpec {
		return etcdv1alpha1.StorageSpec{VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}}
	}
	limit := resource.MustParse("1Gi")
	tests := []struct {
		name    string
		storage etcdv1alpha1.StorageSpec
		options map[string]string
		want    []string
	}{
		// (512Mi - 6 x 64 MB of log - 8Mi) / 2
		{"claim of the least size", claim("512Mi"), nil, []string{"--quota-backend-bytes=72241152"}},
		{"fewer log files kept", claim("512Mi"), map[string]string{"max-wals": "2"}, []string{"--quota-backend-bytes=168241152"}},
		{"emptyDir with a sizeLimit", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}, nil, []string{"--quota-backend-bytes=340676608"}},
		{"a volume for etcd's default: no flag", claim("10Gi"), nil, nil},
		{"the user's quota", claim("512Mi"), map[string]string{"quota-backend-bytes": "16777216"}, []string{"--quota-backend-bytes=16777216"}},
		{"unbounded emptyDir: etcd's default", etcdv1alpha1.StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster("a").withOptions(tt.options).obj()
			c.Spec.Storage = tt.storage
			var got []string
			for _, a := range MemberPod(c, seedMember).Spec.Containers[0].Args {
				if strings.HasPrefix(a, "--quota-backend-bytes") {
					got = append(got, a)
				}
			}
			checkEqual(t, got, tt.want)
		})
	}
}

func TestMemberPodStorage(t *testing.T) {
	t.Parallel()
	claim := &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	memory := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	tests := []struct {
		name      string
		storage   etcdv1alpha1.StorageSpec
		wantClaim bool
		wantEmpty *corev1.EmptyDirVolumeSource
	}{
		{"default emptyDir", etcdv1alpha1.StorageSpec{}, false, &corev1.EmptyDirVolumeSource{}},
		{"memory emptyDir", etcdv1alpha1.StorageSpec{EmptyDir: memory}, false, memory},
		{"claim", etcdv1alpha1.StorageSpec{VolumeClaimTemplate: claim}, true, nil},
		{"both: the claim wins", etcdv1alpha1.StorageSpec{EmptyDir: memory, VolumeClaimTemplate: claim}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster("a").withStorage(tt.storage).obj()
			data := MemberPod(c, seedMember).Spec.Volumes[0]
			checkEqual(t, data.Name, DataVolumeName)
			checkEqual(t, data.EmptyDir, tt.wantEmpty)
			pvc := MemberClaim(c, "a-0")
			if !tt.wantClaim {
				checkEqual(t, data.PersistentVolumeClaim, nil)
				if pvc != nil {
					t.Errorf("MemberClaim = %v, want nil", pvc)
				}
				return
			}
			checkEqual(t, data.PersistentVolumeClaim.ClaimName, "data-a-0")
			checkEqual(t, pvc.Name, "data-a-0")
			checkEqual(t, pvc.Labels[etcdv1alpha1.LabelMember], "a-0")
			checkEqual(t, pvc.Spec.Resources.Requests.Storage().String(), "1Gi")
		})
	}
}

func TestMemberPodTemplate(t *testing.T) {
	t.Parallel()
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	tmpl := etcdv1alpha1.PodTemplate{
		EmbeddedObjectMetadata: etcdv1alpha1.EmbeddedObjectMetadata{
			Labels:      map[string]string{"env": "prod", etcdv1alpha1.LabelCluster: "spoofed"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: etcdv1alpha1.PodSpec{
			ServiceAccountName:            "etcd",
			PriorityClassName:             "high",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			NodeSelector:                  map[string]string{"disk": "ssd"},
			Containers: []corev1.Container{
				{Name: "etcd", Image: "quay.io/coreos/etcd:v3.5.21", Resources: corev1.ResourceRequirements{Limits: limits}, Env: []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "1"}}},
				{Name: "backup", Image: "busybox"},
			},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	c := newCluster("a").withPodTemplate(tmpl).obj()
	pod := MemberPod(c, seedMember)
	checkEqual(t, pod.Labels["env"], "prod")
	checkEqual(t, pod.Labels[etcdv1alpha1.LabelCluster], "a")
	checkEqual(t, pod.Annotations["note"], "x")
	checkEqual(t, pod.Spec.ServiceAccountName, "etcd")
	checkEqual(t, pod.Spec.PriorityClassName, "high")
	checkEqual(t, *pod.Spec.TerminationGracePeriodSeconds, int64(30))
	checkEqual(t, pod.Spec.NodeSelector, map[string]string{"disk": "ssd"})
	names := []string{}
	for _, ctr := range pod.Spec.Containers {
		names = append(names, ctr.Name)
	}
	checkEqual(t, names, []string{"etcd", "backup"})
	etcd := pod.Spec.Containers[0]
	checkEqual(t, etcd.Image, "quay.io/coreos/etcd:v3.5.21")
	checkEqual(t, etcd.Resources.Limits, limits)
	checkEqual(t, etcd.Env[2:], []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "1"}})
	checkEqual(t, etcd.Command, []string{"etcd"})
	if !strings.HasPrefix(etcd.Args[0], "--name=") {
		t.Errorf("the template replaced the operator's args: %v", etcd.Args)
	}
	checkEqual(t, len(pod.Spec.Volumes), 2)
	checkEqual(t, pod.Spec.Volumes[1].Name, "scratch")

	// The builder shares no memory with the cluster.
	pod.Spec.Containers[1].Image = "changed"
	pod.Spec.NodeSelector["disk"] = "hdd"
	checkEqual(t, c.Spec.PodTemplate.Spec.Containers[1].Image, "busybox")
	checkEqual(t, c.Spec.PodTemplate.Spec.NodeSelector["disk"], "ssd")
}

func TestInitialCluster(t *testing.T) {
	t.Parallel()
	got := InitialCluster(map[string]string{"b": "http://b:2380", "a": "http://a:2380"})
	checkEqual(t, got, "a=http://a:2380,b=http://b:2380")
}

func TestPodSpecHash(t *testing.T) {
	t.Parallel()
	claim := func(size string) etcdv1alpha1.StorageSpec {
		return etcdv1alpha1.StorageSpec{VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}}
	}
	image := func(img string) etcdv1alpha1.PodTemplate {
		return etcdv1alpha1.PodTemplate{Spec: etcdv1alpha1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: img}}}}
	}
	base := newCluster("a").withStorage(claim("10Gi")).obj()
	tests := []struct {
		name    string
		cluster *etcdv1alpha1.EtcdCluster
		rolls   bool
	}{
		{"same spec", newCluster("a").withStorage(claim("10Gi")).obj(), false},
		{"replicas", newCluster("a").withStorage(claim("10Gi")).withReplicas(5).obj(), false},
		// Past 4.4Gi the quota is etcd's default and stays: the claim grows
		// in place. A smaller claim's quota grows with it, so its members
		// roll to take it up (TestMemberPodQuotaFitsTheVolume).
		{"claim size (grown in place)", newCluster("a").withStorage(claim("20Gi")).obj(), false},
		{"claim size under 4.4Gi", newCluster("a").withStorage(claim("2Gi")).obj(), true},
		{"an option", newCluster("a").withStorage(claim("10Gi")).withOptions(map[string]string{"election-timeout": "2000"}).obj(), true},
		{"the image", newCluster("a").withStorage(claim("10Gi")).withPodTemplate(image("quay.io/coreos/etcd:v3.5.21")).obj(), true},
		{"the storage kind", newCluster("a").obj(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if rolls := PodSpecHash(tt.cluster) != PodSpecHash(base); rolls != tt.rolls {
				t.Errorf("hash changed = %v, want %v", rolls, tt.rolls)
			}
		})
	}
	annotated := base.DeepCopy()
	annotated.Annotations = map[string]string{etcdv1alpha1.AnnotationStartEmpty: "1"}
	checkEqual(t, PodSpecHash(annotated), PodSpecHash(base))
	checkEqual(t, MemberPod(base, seedMember).Annotations[etcdv1alpha1.AnnotationPodSpecHash], PodSpecHash(base))
	checkEqual(t, EtcdImage(base), DefaultEtcdImage)
	checkEqual(t, EtcdImage(newCluster("a").withPodTemplate(image("etcd:v3.5.21")).obj()), "etcd:v3.5.21")
}
