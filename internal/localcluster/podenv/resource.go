package podenv

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceFieldRef resolves a downward-API resource field (ref.Resource:
// limits.cpu, limits.memory, limits.ephemeral-storage, limits.hugepages-<size>
// and the same under requests.) of a container of pod, as the kubelet does:
//
//   - the container is ref.ContainerName, or containerName when ref names
//     none (an env var's container); it is looked up among the pod's
//     containers, then its init containers;
//   - the value is divided by ref.Divisor (1 when zero) and rounded up: cpu
//     in cores by default (250m gives 1, 250m with divisor 1m gives 250),
//     memory, ephemeral storage and hugepages in bytes;
//   - a cpu, memory or ephemeral-storage limit the container does not set
//     (or sets to zero) is the pod-level limit (spec.resources.limits, cpu and
//     memory only) or else nodeAllocatable's value, when nodeAllocatable has
//     that resource; an absent request is 0.
func ResourceFieldRef(pod *corev1.Pod, containerName string, ref *corev1.ResourceFieldSelector, nodeAllocatable corev1.ResourceList) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = containerName
	}
	c := findContainer(pod, name)
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef %s: container %q not found in pod %s/%s", ref.Resource, name, pod.Namespace, pod.Name)
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	var list corev1.ResourceList
	switch kind {
	case "limits":
		list = defaultLimits(pod, c.Resources.Limits, nodeAllocatable)
	case "requests":
		list = c.Resources.Requests
	default:
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	quantity := list[corev1.ResourceName(res)]
	switch rn := corev1.ResourceName(res); {
	case rn == corev1.ResourceCPU:
		return ceilDiv(quantity.MilliValue(), divisor.MilliValue()), nil
	case rn == corev1.ResourceMemory, rn == corev1.ResourceEphemeralStorage,
		strings.HasPrefix(res, corev1.ResourceHugePagesPrefix):
		return ceilDiv(quantity.Value(), divisor.Value()), nil
	}
	return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
}

// findContainer returns the container of pod named name, looking at the
// containers then the init containers; nil when there is none.
func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// defaultLimits returns limits completed as the kubelet completes them for the
// downward API: a cpu, memory or ephemeral-storage limit that is absent or
// zero takes the pod-level limit (cpu and memory) or else the node's
// allocatable value, when allocatable has that resource. limits is not
// changed.
func defaultLimits(pod *corev1.Pod, limits, allocatable corev1.ResourceList) corev1.ResourceList {
	fallback := allocatable.DeepCopy()
	if pod.Spec.Resources != nil {
		for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			podLimit, ok := pod.Spec.Resources.Limits[rn]
			if _, inAllocatable := fallback[rn]; ok && inAllocatable && !podLimit.IsZero() {
				fallback[rn] = podLimit.DeepCopy()
			}
		}
	}
	out := limits.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := out[rn]; ok && !q.IsZero() {
			continue
		}
		if q, ok := fallback[rn]; ok {
			out[rn] = q.DeepCopy()
		}
	}
	return out
}

// ceilDiv returns a/b rounded up, in decimal, computed in floating point as
// the kubelet does.
func ceilDiv(a, b int64) string {
	return strconv.FormatInt(int64(math.Ceil(float64(a)/float64(b))), 10)
}
