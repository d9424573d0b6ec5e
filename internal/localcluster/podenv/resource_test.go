package podenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResourceFieldRef(t *testing.T) {
	t.Parallel()
	q := resource.MustParse
	allocatable := corev1.ResourceList{
		corev1.ResourceCPU:              q("4"),
		corev1.ResourceMemory:           q("8Gi"),
		corev1.ResourceEphemeralStorage: q("100Gi"),
	}
	noLimits := func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = nil }
	tests := []struct {
		name          string
		pod           *corev1.Pod
		containerName string
		ref           corev1.ResourceFieldSelector
		allocatable   corev1.ResourceList
		want          string
		wantErr       string
	}{
		{"cpu limit rounded up to cores", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "2", ""},
		{"cpu limit in millicores", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, allocatable, "1500", ""},
		{"cpu request rounded up", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "requests.cpu"}, allocatable, "1", ""},
		{"cpu request in millicores", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("1m")}, allocatable, "250", ""},
		{"zero divisor is 1", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("0")}, allocatable, "1", ""},
		{"memory limit in bytes", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.memory"}, allocatable, "1073741824", ""},
		{"memory limit in Mi", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}, allocatable, "1024", ""},
		{"memory limit in M rounded up", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1M")}, allocatable, "1074", ""},
		{"memory request", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: q("1Mi")}, allocatable, "512", ""},
		{"absent request is 0", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "requests.ephemeral-storage"}, allocatable, "0", ""},
		{"absent limit is node allocatable", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.ephemeral-storage", Divisor: q("1Gi")}, allocatable, "100", ""},
		{"no limits: cpu from allocatable", newPod().with(noLimits).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "4", ""},
		{"no limits: memory from allocatable", newPod().with(noLimits).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Gi")}, allocatable, "8", ""},
		{"zero limit is node allocatable", newPod().with(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = q("0")
		}).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "4", ""},
		{"no limit and no allocatable is 0", newPod().with(noLimits).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, nil, "0", ""},
		{"pod-level limit before allocatable", newPod().with(noLimits).with(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("3"), corev1.ResourceMemory: q("2Gi")}}
		}).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Gi")}, allocatable, "2", ""},
		{"pod-level ephemeral-storage limit is not used", newPod().with(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("1Gi")}}
		}).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.ephemeral-storage", Divisor: q("1Gi")}, allocatable, "100", ""},
		{"container limit before pod-level limit", newPod().with(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("3")}}
		}).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "2", ""},
		{"hugepages limit", newPod().with(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = q("4Mi")
		}).obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.hugepages-2Mi", Divisor: q("1Mi")}, allocatable, "4", ""},
		{"ref names the container", newPod().obj(), "init", corev1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "etcd"}, allocatable, "2", ""},
		{"init container", newPod().obj(), "init", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "4", ""},
		{"unknown container", newPod().obj(), "nope", corev1.ResourceFieldSelector{Resource: "limits.cpu"}, allocatable, "", `resourceFieldRef limits.cpu: container "nope" not found in pod db/etcd-0`},
		{"unsupported resource", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "limits.gpu"}, allocatable, "", `unsupported container resource "limits.gpu"`},
		{"unsupported kind", newPod().obj(), "etcd", corev1.ResourceFieldSelector{Resource: "cpu"}, allocatable, "", `unsupported container resource "cpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := tt.pod.DeepCopy()
			got, err := ResourceFieldRef(tt.pod, tt.containerName, &tt.ref, tt.allocatable)
			checkResult(t, got, err, tt.want, tt.wantErr)
			if !before.Spec.Containers[0].Resources.Limits.Cpu().Equal(*tt.pod.Spec.Containers[0].Resources.Limits.Cpu()) ||
				len(before.Spec.Containers[0].Resources.Limits) != len(tt.pod.Spec.Containers[0].Resources.Limits) {
				t.Errorf("pod limits changed: %v -> %v", before.Spec.Containers[0].Resources.Limits, tt.pod.Spec.Containers[0].Resources.Limits)
			}
		})
	}
}
