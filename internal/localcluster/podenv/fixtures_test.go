package podenv

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podBuilder builds test pods fluently: newPod().withX(...).obj().
type podBuilder struct{ pod *corev1.Pod }

// newPod returns a builder for a scheduled, running pod db/etcd-0 with a
// container "etcd" (limits 1500m cpu and 1Gi memory, requests 250m and
// 512Mi) and an init container "init" (no resources).
func newPod() *podBuilder {
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "etcd-0",
			Namespace:   "db",
			UID:         "0b7e5f4c-uid",
			Labels:      map[string]string{"app": "etcd", "example.com/role": "member"},
			Annotations: map[string]string{"note": "say \"hi\"\n", "a": "1"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node-1",
			ServiceAccountName: "etcd",
			InitContainers:     []corev1.Container{{Name: "init"}},
			Containers: []corev1.Container{{
				Name: "etcd",
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
			}},
		},
		Status: corev1.PodStatus{
			HostIP:  "10.0.0.1",
			HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			PodIP:   "10.213.1.5",
			PodIPs:  []corev1.PodIP{{IP: "10.213.1.5"}, {IP: "fd01::5"}},
		},
	}}
}

// with applies f to the pod.
func (b *podBuilder) with(f func(*corev1.Pod)) *podBuilder {
	f(b.pod)
	return b
}

// withEnv sets the env of the "etcd" container.
func (b *podBuilder) withEnv(env ...corev1.EnvVar) *podBuilder {
	b.pod.Spec.Containers[0].Env = env
	return b
}

// withEnvFrom sets the envFrom of the "etcd" container.
func (b *podBuilder) withEnvFrom(from ...corev1.EnvFromSource) *podBuilder {
	b.pod.Spec.Containers[0].EnvFrom = from
	return b
}

// obj returns the pod.
func (b *podBuilder) obj() *corev1.Pod { return b.pod }
