package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// etcdPod is a single-member etcd, a real server to reach over the network.
func etcdPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Hostname:                      name,
			Subdomain:                     "members",
			TerminationGracePeriodSeconds: ptr(int64(5)),
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   "quay.io/coreos/etcd:v3.6.16",
				Command: []string{"etcd", "--data-dir=/var/lib/etcd", "--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://$(POD_IP):2379"},
				Env:     []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports:   []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("client")}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func TestDNSAndServices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "members"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Name: "client", Port: 2379}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Name: "client", Port: 80, TargetPort: intstr.FromString("client")}}}},
	} {
		if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	db := createPod(ctx, t, ns, etcdPod("db"), true)

	out := runInPod(ctx, t, ns, "client", `
set -e
echo "pod: $(getent hosts db.members.`+ns+`.svc.cluster.local)"
echo "short: $(getent hosts db.members)"
curl -sS --max-time 5 http://db.`+ns+`.svc.cluster.local/version
echo
curl -sS --max-time 5 http://db/health
`)
	if !strings.Contains(out, "pod: "+db.Status.PodIP) || !strings.Contains(out, "short: "+db.Status.PodIP) {
		t.Errorf("the pod's DNS name did not resolve to its IP %s from another pod:\n%s", db.Status.PodIP, out)
	}
	if !strings.Contains(out, `"etcdserver":"3.6.16"`) || !strings.Contains(out, `"health":"true"`) {
		t.Errorf("the ClusterIP Service did not answer with etcd's version and health:\n%s", out)
	}
}

func TestVolumesOutliveOrDieWithPods(t *testing.T) {
	t.Parallel()
	// The emptyDir is mounted under /etc, which comes from the host: a
	// volume may still go anywhere, as in an image's own /etc.
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	createClaim(ctx, t, ns, "data", "16Mi")
	writer := func(name string) *corev1.Pod {
		p := busybox(name, `
for d in /claim /etc/scratch; do
  if [ -f $d/marker ]; then echo "$d kept $(cat $d/marker)"; else echo "$d empty"; fi
done
echo `+name+` > /claim/marker; echo `+name+` > /etc/scratch/marker
sleep 3600`)
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "claim", MountPath: "/claim"}, {Name: "scratch", MountPath: "/etc/scratch"}}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		return p
	}
	createPod(ctx, t, ns, writer("first"), false)
	eventually(t, 30*time.Second, "the first pod to write its markers", func() error {
		if out := containerLog(t, ns, "first", "main"); !strings.Contains(out, "/etc/scratch empty") {
			return fmt.Errorf("log: %q", out)
		}
		return nil
	})
	deletePodAndWait(ctx, t, ns, "first")
	createPod(ctx, t, ns, writer("second"), false)
	eventually(t, 30*time.Second, "the second pod to report what it found", func() error {
		out := containerLog(t, ns, "second", "main")
		if !strings.Contains(out, "/claim kept first") {
			return fmt.Errorf("the claim's data did not survive the pod: %q", out)
		}
		if !strings.Contains(out, "/etc/scratch empty") {
			return fmt.Errorf("the emptyDir's data survived the pod: %q", out)
		}
		return nil
	})
}

func deletePodAndWait(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod "+name+" to be gone", func() error {
		if _, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

func TestProbes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)

	// Healthy for 4 s, then the liveness probe fails and the kubelet
	// restarts it; the file comes back with the restart.
	live := busybox("live", "touch /tmp/healthy; sleep 4; rm /tmp/healthy; sleep 3600")
	live.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds:    1,
		FailureThreshold: 2,
	}
	createPod(ctx, t, ns, live, false)
	eventually(t, time.Minute, "the failing liveness probe to restart the container", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "live", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := p.Status.ContainerStatuses; len(s) == 0 || s[0].RestartCount < 1 {
			return fmt.Errorf("containers: %s", describeContainers(p))
		}
		return nil
	})

	// Ready only while /tmp/ready exists: readiness gates the Ready
	// condition without restarting anything.
	ready := busybox("ready", "sleep 3; touch /tmp/ready; sleep 3600")
	ready.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds: 1,
	}
	p := createPod(ctx, t, ns, ready, false)
	if podReady(p) {
		t.Fatal("the pod is Ready before its readiness probe passed")
	}
	p = waitPod(ctx, t, ns, "ready", true)
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("readiness restarted the container: %s", describeContainers(p))
	}
}

func TestServiceAccountTokenRBAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := busybox("api", `
sa=/var/run/secrets/kubernetes.io/serviceaccount
get() { curl -s -o /dev/null -w "%{http_code}" --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" https://kubernetes.default.svc/api/v1/namespaces/$(cat $sa/namespace)/$1; }
echo "configmaps=$(get configmaps) secrets=$(get secrets)"`)
	pod.Spec.ServiceAccountName = "reader"
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the pod to call the API server", func() error {
		out := containerLog(t, ns, "api", "main")
		if !strings.Contains(out, "configmaps=") {
			return fmt.Errorf("log: %q", out)
		}
		if !strings.Contains(out, "configmaps=200 secrets=403") {
			t.Fatalf("want configmaps allowed and secrets forbidden, got %q", out)
		}
		return nil
	})
}

// TestBridgeKeepsItsAddress creates and deletes pods and checks that the
// bridge, every pod's gateway, keeps its MAC address: if it changed with
// its ports, the other pods would send to a stale MAC until their ARP
// entries expire, losing the API server and every ClusterIP for a minute.
func TestBridgeKeepsItsAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	mac := func() string {
		t.Helper()
		b, err := os.ReadFile("/sys/class/net/" + env.Network.Bridge() + "/address")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	before := mac()
	for i := range 4 {
		p := createPod(ctx, t, ns, busybox(fmt.Sprintf("churn-%d", i), "sleep 600"), false)
		if err := client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "pod "+p.Name+" to be gone", func() error {
			if _, err := client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if after := mac(); after != before {
			t.Fatalf("the bridge's MAC changed from %s to %s as pods came and went", before, after)
		}
	}
}
