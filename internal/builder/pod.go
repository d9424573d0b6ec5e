package builder

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Defaults of member Pods.
const (
	// DefaultEtcdImage runs when podTemplate gives the etcd container no
	// image.
	DefaultEtcdImage = "quay.io/coreos/etcd:v3.6.16"
	// EtcdContainerName is the operator's container in a member Pod; a
	// podTemplate container of this name is merged into it.
	EtcdContainerName = "etcd"
	// DataVolumeName is the volume holding a member's data.
	DataVolumeName = "etcd-data"
	// DataDir is where the data volume is mounted and etcd keeps its data.
	DataDir = "/var/lib/etcd"
	// DefaultAutoCompactionMode and DefaultAutoCompactionRetention are
	// etcd's auto-compaction unless spec.options sets either flag. etcd
	// compacts nothing by default, and a tenant's kube-apiserver cannot
	// compact (it records compactions in a key outside its prefix), so
	// without this a cluster's history grows until NOSPACE. Periodic 5m is
	// what a kube-apiserver's own compactor does by default
	// (--etcd-compaction-interval=5m): every 5 minutes, the leader compacts
	// to the revision of 5 minutes before, keeping 5 to 10 minutes of
	// history for watches to resume from.
	DefaultAutoCompactionMode      = "periodic"
	DefaultAutoCompactionRetention = "5m"
)

// Initial cluster states of a member: a founder of a new cluster, or a
// member joining an existing one.
const (
	ClusterStateNew      = "new"
	ClusterStateExisting = "existing"
	// InitialClusterStateEnv is the environment variable etcd reads
	// --initial-cluster-state from.
	InitialClusterStateEnv = "ETCD_INITIAL_CLUSTER_STATE"
	// InitialClusterEnv is the environment variable etcd reads
	// --initial-cluster from.
	InitialClusterEnv = "ETCD_INITIAL_CLUSTER"
)

// Member is what a member Pod needs besides the cluster's spec.
type Member struct {
	// Name is the Pod's name and the etcd member's name.
	Name string
	// ClusterState is ClusterStateNew for the member that founds the
	// cluster, ClusterStateExisting for members added to it.
	ClusterState string
	// InitialCluster is etcd's --initial-cluster: name=peerURL pairs of the
	// members as etcd knows them when this one starts, itself included.
	InitialCluster string
	// TrustBundleHash is the hash of the trust bundle the Pod starts with
	// (TrustBundleHash); empty without TLS.
	TrustBundleHash string
}

// PeerURL is the peer URL of a member: its stable name under the headless
// Service, https when peers use TLS.
func PeerURL(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c.Spec.Security.PeerTLS()), MemberHost(c, member), PeerPort)
}

// ClientURL is the client URL of a member, https when clients use TLS.
func ClientURL(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c.Spec.Security.ClientTLS()), MemberHost(c, member), ClientPort)
}

// ClientEndpoint is the URL clients reach the cluster at: its client
// Service, which stays the same whatever members come and go, https when
// clients use TLS.
func ClientEndpoint(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme(c.Spec.Security.ClientTLS()), ClientServiceName(c), c.Namespace, ClientPort)
}

// MemberHost is the DNS name of a member:
// <member>.<cluster>-headless.<namespace>.svc.
func MemberHost(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, HeadlessServiceName(c), c.Namespace)
}

// InitialCluster renders etcd's --initial-cluster from member names and
// peer URLs, sorted by name so the same members always give the same flag.
func InitialCluster(peers map[string]string) string {
	names := slices.Sorted(maps.Keys(peers))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+peers[n])
	}
	return strings.Join(parts, ",")
}

// InitialClusterOf is the --initial-cluster of a member Pod: its
// annotation, or the flag of a Pod built before the annotation was ("" when
// it has neither).
func InitialClusterOf(p *corev1.Pod) string {
	if v, ok := p.Annotations[etcdv1alpha1.AnnotationInitialCluster]; ok {
		return v
	}
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != EtcdContainerName {
			continue
		}
		for _, a := range ctr.Args {
			if v, ok := strings.CutPrefix(a, "--initial-cluster="); ok {
				return v
			}
		}
	}
	return ""
}

// InitialClusterNames are the member names of an --initial-cluster value.
func InitialClusterNames(initial string) []string {
	var names []string
	for part := range strings.SplitSeq(initial, ",") {
		if name, _, ok := strings.Cut(part, "="); ok {
			names = append(names, name)
		}
	}
	return names
}

// ClusterToken is the --initial-cluster-token of a cluster: its UID, unique
// to this incarnation of the resource, so members of a deleted cluster of
// the same name can never join it. A cluster started anew after losing
// every member (etcdv1alpha1.AnnotationStartEmpty) adds the lost cluster's
// ID: etcd derives member and cluster IDs from the token and peer URLs, so
// the new cluster gets an ID of its own and the annotation no longer
// matches it.
func ClusterToken(c *etcdv1alpha1.EtcdCluster) string {
	if lost := c.Annotations[etcdv1alpha1.AnnotationStartEmpty]; lost != "" {
		return string(c.UID) + "-after-" + lost
	}
	return string(c.UID)
}

// ClaimName is the name of a member's PersistentVolumeClaim.
func ClaimName(member string) string {
	return "data-" + member
}

// MemberLabels are the labels of a member's Pod and claim: the cluster's
// labels, the member's name, and the template's labels, which never
// replace ours.
func MemberLabels(c *etcdv1alpha1.EtcdCluster, member string, extra map[string]string) map[string]string {
	labels := maps.Clone(extra)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, ClusterLabels(c))
	labels[etcdv1alpha1.LabelMember] = member
	return labels
}

// MemberPod builds the Pod of a member from the cluster's podTemplate,
// annotated with the hash of what shapes every member's Pod.
func MemberPod(c *etcdv1alpha1.EtcdCluster, m Member) *corev1.Pod {
	pod := memberPod(c, m)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[etcdv1alpha1.AnnotationPodSpecHash] = PodSpecHash(c)
	pod.Annotations[etcdv1alpha1.AnnotationInitialClusterState] = m.ClusterState
	pod.Annotations[etcdv1alpha1.AnnotationInitialCluster] = m.InitialCluster
	if m.TrustBundleHash != "" {
		pod.Annotations[etcdv1alpha1.AnnotationTrustBundleHash] = m.TrustBundleHash
	}
	return pod
}

// PodSpecHash hashes what shapes every member's Pod (the image, options,
// pod template, storage kind, TLS): the Pod of one placeholder member,
// built from the spec alone. A member whose Pod carries another hash is
// rolled. Annotations of the EtcdCluster (which only matter to a new
// cluster's token) do not count.
func PodSpecHash(c *etcdv1alpha1.EtcdCluster) string {
	cc := c.DeepCopy()
	cc.Annotations = nil
	pod := memberPod(cc, Member{Name: "member", ClusterState: ClusterStateExisting})
	// Pod specs hold no channels, functions or NaNs: Marshal cannot fail.
	data, _ := json.Marshal(struct {
		Labels, Annotations map[string]string
		Spec                corev1.PodSpec
	}{pod.Labels, pod.Annotations, pod.Spec})
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// EtcdImage is the image of the members' etcd container.
func EtcdImage(c *etcdv1alpha1.EtcdCluster) string {
	for _, ctr := range c.Spec.PodTemplate.Spec.Containers {
		if ctr.Name == EtcdContainerName && ctr.Image != "" {
			return ctr.Image
		}
	}
	return DefaultEtcdImage
}

func memberPod(c *etcdv1alpha1.EtcdCluster, m Member) *corev1.Pod {
	tmpl := c.Spec.PodTemplate.DeepCopy()
	spec := tmpl.Spec
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       c.Namespace,
			Labels:          MemberLabels(c, m.Name, tmpl.Labels),
			Annotations:     maps.Clone(tmpl.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: corev1.PodSpec{
			Hostname:                      m.Name,
			Subdomain:                     HeadlessServiceName(c),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			EnableServiceLinks:            ptr.To(false), // ETCD_* variables would be read as flags
			ImagePullSecrets:              spec.ImagePullSecrets,
			ServiceAccountName:            spec.ServiceAccountName,
			Affinity:                      spec.Affinity,
			NodeSelector:                  spec.NodeSelector,
			Tolerations:                   spec.Tolerations,
			SecurityContext:               spec.SecurityContext,
			PriorityClassName:             spec.PriorityClassName,
			TopologySpreadConstraints:     spec.TopologySpreadConstraints,
			TerminationGracePeriodSeconds: spec.TerminationGracePeriodSeconds,
			SchedulerName:                 spec.SchedulerName,
			RuntimeClassName:              spec.RuntimeClassName,
			ReadinessGates:                spec.ReadinessGates,
			Volumes:                       append(operatorVolumes(c, m.Name), spec.Volumes...),
		},
	}
	etcd := etcdContainer(c, m)
	var sidecars []corev1.Container
	for _, ctr := range spec.Containers {
		if ctr.Name == EtcdContainerName {
			mergeContainer(&etcd, ctr)
			continue
		}
		sidecars = append(sidecars, ctr)
	}
	pod.Spec.Containers = append([]corev1.Container{etcd}, sidecars...)
	return pod
}

// dataVolume is the member's data volume: its claim, or an emptyDir.
func dataVolume(c *etcdv1alpha1.EtcdCluster, member string) corev1.Volume {
	v := corev1.Volume{Name: DataVolumeName}
	switch {
	case c.Spec.Storage.UsesPersistentStorage():
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(member)}
	case c.Spec.Storage.EmptyDir != nil:
		v.EmptyDir = c.Spec.Storage.EmptyDir.DeepCopy()
	default:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	return v
}

// livenessPeriod is how often the kubelet asks a member's /livez, in
// seconds.
const livenessPeriod = 10

// livenessFailures is how many failed liveness probes in a row restart
// a member: enough to span the cluster's DefragmentBudget, and at least
// three.
func livenessFailures(c *etcdv1alpha1.EtcdCluster) int32 {
	period := livenessPeriod * time.Second
	return max(3, int32((c.DefragmentBudget()+period-1)/period))
}

// etcdContainer is the operator's etcd container before the template's
// etcd container is merged into it.
func etcdContainer(c *etcdv1alpha1.EtcdCluster, m Member) corev1.Container {
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(MetricsPortName)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	return corev1.Container{
		Name:    EtcdContainerName,
		Image:   DefaultEtcdImage,
		Command: []string{"etcd"},
		Args:    EtcdArgs(c, m),
		// --initial-cluster-state and --initial-cluster, from the Pod's
		// annotations when the container starts: a founder's state turns
		// "existing" once the cluster formed, and the members follow the
		// member list (see AnnotationInitialClusterState and
		// AnnotationInitialCluster).
		Env: []corev1.EnvVar{
			annotationEnv(InitialClusterStateEnv, etcdv1alpha1.AnnotationInitialClusterState),
			annotationEnv(InitialClusterEnv, etcdv1alpha1.AnnotationInitialCluster),
		},
		Ports: []corev1.ContainerPort{
			{Name: ClientPortName, ContainerPort: ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: PeerPortName, ContainerPort: PeerPort, Protocol: corev1.ProtocolTCP},
			{Name: MetricsPortName, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		// A member may need a while to replay its log or catch up: the
		// startup probe gives it five minutes before liveness counts,
		// asking every second, so that a member that starts in a second
		// is Ready a second later (readiness is asked only once startup
		// passed; every 5 s it added 5 to 10 s to each start).
		// Readiness is asked every second too: /livez passes about 0.2 s
		// before /readyz does (etcd v3.6.16, one member), and a startup
		// probe that lands in between has readiness fail once; every 2 s,
		// that was 2 s more to two of three one-member starts in a
		// bench (issue #17).
		// /livez waits on the database, which a defragmentation holds:
		// liveness lets the longest one run (DefragmentBudget).
		StartupProbe:   probe("/livez", 1, 300),
		LivenessProbe:  probe("/livez", livenessPeriod, livenessFailures(c)),
		ReadinessProbe: probe("/readyz", 1, 3),
		VolumeMounts:   operatorMounts(c),
	}
}

// annotationEnv is the environment variable name holding the Pod's
// annotation key, read when the container starts.
func annotationEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: "metadata.annotations['" + key + "']",
	}}}
}

// EtcdArgs are the etcd flags of a member: the ones the operator owns,
// the default auto-compaction unless spec.options sets it, then
// spec.options sorted by name (the schema refuses options that would
// override the operator's).
func EtcdArgs(c *etcdv1alpha1.EtcdCluster, m Member) []string {
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + DataDir,
		fmt.Sprintf("--listen-peer-urls=%s://0.0.0.0:%d", scheme(c.Spec.Security.PeerTLS()), PeerPort),
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", scheme(c.Spec.Security.ClientTLS()), ClientPort),
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", MetricsPort),
		"--initial-advertise-peer-urls=" + PeerURL(c, m.Name),
		"--advertise-client-urls=" + ClientURL(c, m.Name),
		"--initial-cluster-token=" + ClusterToken(c),
	}
	args = append(args, tlsArgs(c, m.Name)...)
	args = append(args, compactionArgs(c)...)
	args = append(args, quotaArgs(c)...)
	for _, k := range slices.Sorted(maps.Keys(c.Spec.Options)) {
		args = append(args, "--"+k+"="+c.Spec.Options[k])
	}
	return args
}

// compactionArgs turn on etcd's periodic auto-compaction
// (DefaultAutoCompactionRetention), unless spec.options sets
// auto-compaction-mode or auto-compaction-retention: then both are the
// user's, and etcd's own defaults apply to the one not given (mode
// periodic, retention 0, which compacts nothing).
func compactionArgs(c *etcdv1alpha1.EtcdCluster) []string {
	for _, k := range []string{"auto-compaction-mode", "auto-compaction-retention"} {
		if _, set := c.Spec.Options[k]; set {
			return nil
		}
	}
	return []string{"--auto-compaction-mode=" + DefaultAutoCompactionMode, "--auto-compaction-retention=" + DefaultAutoCompactionRetention}
}

// quotaArgs set the database's quota to what a member's volume holds
// (VolumeQuota), unless spec.options sets quota-backend-bytes, or the
// volume is unbounded or holds etcd's default quota: then etcd's default
// applies (and a volume growing past it does not roll the members).
func quotaArgs(c *etcdv1alpha1.EtcdCluster) []string {
	if _, set := c.Spec.Options["quota-backend-bytes"]; set {
		return nil
	}
	if q, ok := c.VolumeQuota(); ok && q != etcdv1alpha1.DefaultQuotaBackendBytes {
		return []string{"--quota-backend-bytes=" + strconv.FormatInt(q, 10)}
	}
	return nil
}

// mergeContainer merges the template's etcd container into the operator's:
// the fields a user may set replace ours when given; env, envFrom and
// volumeMounts are added. Name, command and args stay the operator's.
func mergeContainer(dst *corev1.Container, src corev1.Container) {
	if src.Image != "" {
		dst.Image = src.Image
	}
	if src.ImagePullPolicy != "" {
		dst.ImagePullPolicy = src.ImagePullPolicy
	}
	if src.Resources.Limits != nil || src.Resources.Requests != nil || src.Resources.Claims != nil {
		dst.Resources = src.Resources
	}
	for _, p := range []struct{ dst, src **corev1.Probe }{
		{&dst.StartupProbe, &src.StartupProbe},
		{&dst.LivenessProbe, &src.LivenessProbe},
		{&dst.ReadinessProbe, &src.ReadinessProbe},
	} {
		if *p.src != nil {
			*p.dst = *p.src
		}
	}
	if src.SecurityContext != nil {
		dst.SecurityContext = src.SecurityContext
	}
	if src.Lifecycle != nil {
		dst.Lifecycle = src.Lifecycle
	}
	dst.Env = append(dst.Env, src.Env...)
	dst.EnvFrom = append(dst.EnvFrom, src.EnvFrom...)
	dst.VolumeMounts = append(dst.VolumeMounts, src.VolumeMounts...)
	dst.Ports = append(dst.Ports, extraPorts(dst.Ports, src.Ports)...)
}

// extraPorts are the ports of add whose names are not in have.
func extraPorts(have, add []corev1.ContainerPort) []corev1.ContainerPort {
	var extra []corev1.ContainerPort
	for _, p := range add {
		if !slices.ContainsFunc(have, func(h corev1.ContainerPort) bool { return h.Name == p.Name || h.ContainerPort == p.ContainerPort }) {
			extra = append(extra, p)
		}
	}
	return extra
}

// MemberClaim builds the PersistentVolumeClaim of a member from
// volumeClaimTemplate, or returns nil when members use an emptyDir.
func MemberClaim(c *etcdv1alpha1.EtcdCluster, member string) *corev1.PersistentVolumeClaim {
	vct := c.Spec.Storage.VolumeClaimTemplate
	if vct == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ClaimName(member),
			Namespace:       c.Namespace,
			Labels:          MemberLabels(c, member, vct.Labels),
			Annotations:     maps.Clone(vct.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: *vct.Spec.DeepCopy(),
	}
}
