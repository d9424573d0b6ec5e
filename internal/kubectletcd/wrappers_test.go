package kubectletcd

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

const testNamespace = "prod"

// testNow is the clock of every test: ages in the golden files are
// measured from it.
var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

// clusterWrapper builds EtcdClusters for tests.
type clusterWrapper struct{ etcdv1alpha1.EtcdCluster }

func newCluster(name string) *clusterWrapper {
	replicas := int32(3)
	return &clusterWrapper{etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Generation: 2},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: &replicas},
	}}
}

func (w *clusterWrapper) obj() *etcdv1alpha1.EtcdCluster { return w.DeepCopy() }

func (w *clusterWrapper) replicas(n int32) *clusterWrapper {
	w.Spec.Replicas = &n
	return w
}

func (w *clusterWrapper) paused() *clusterWrapper {
	w.Annotations = map[string]string{etcdv1alpha1.AnnotationPaused: "true"}
	return w
}

// formed gives the cluster the status of a formed cluster that serves
// clients with TLS.
func (w *clusterWrapper) formed(version string) *clusterWrapper {
	w.Status.ObservedGeneration = w.Generation
	w.Status.Version = version
	w.Status.ClusterID = "cdf818194e3a8c32"
	w.Status.Endpoints = []string{"https://" + w.Name + "." + w.Namespace + ".svc:2379"}
	w.Status.CASecretName = w.Name + "-ca-bundle"
	return w
}

func (w *clusterWrapper) condition(typ string, status metav1.ConditionStatus, reason, message string, age time.Duration) *clusterWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: ago(age),
	})
	return w
}

func (w *clusterWrapper) member(m etcdv1alpha1.MemberStatus) *clusterWrapper {
	w.Status.Members = append(w.Status.Members, m)
	w.Status.Replicas++
	if m.Healthy {
		w.Status.ReadyReplicas++
	}
	w.Status.UpdatedReplicas++
	return w
}

// healthyMember is a member that answered its last probe.
func healthyMember(name, id string, role etcdv1alpha1.MemberRole, raftIndex uint64) etcdv1alpha1.MemberStatus {
	probed := ago(7 * time.Second)
	return etcdv1alpha1.MemberStatus{
		Name: name, ID: id, Role: role, Version: "3.6.5", Healthy: true,
		DBSize: 25_165_824, DBSizeInUse: 11_534_336, RaftTerm: 4, RaftIndex: raftIndex,
		LastProbeTime: &probed,
	}
}

// podWrapper builds member Pods for tests.
type podWrapper struct{ corev1.Pod }

func newPod(cluster, name string) *podWrapper {
	return &podWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{etcdv1alpha1.LabelCluster: cluster}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: true}},
		},
	}}
}

func (w *podWrapper) obj() *corev1.Pod { return w.DeepCopy() }

func (w *podWrapper) node(n string) *podWrapper {
	w.Spec.NodeName = n
	return w
}

func (w *podWrapper) restarts(n int32) *podWrapper {
	w.Status.ContainerStatuses[0].RestartCount = n
	return w
}

func (w *podWrapper) waiting(reason string) *podWrapper {
	w.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
	w.Status.ContainerStatuses[0].Ready = false
	w.Status.Conditions[0].Status = corev1.ConditionFalse
	return w
}

func (w *podWrapper) notReady() *podWrapper {
	w.Status.Conditions[0].Status = corev1.ConditionFalse
	return w
}

// result is what a command run printed and returned.
type result struct {
	out, errOut string
	err         error
	client      client.Client
}

// runCommand runs kubectl etcd with args against a fake API server
// holding objs (funcs, when given, intercept its calls) on a terminal
// width columns wide (0: not a terminal).
func runCommand(t *testing.T, objs []client.Object, funcs *interceptor.Funcs, width int, args ...string) result {
	t.Helper()
	return runCommandWith(t, objs, funcs, width, nil, args...)
}

// runCommandWith is runCommand with the options changed by edit, when not
// nil.
func runCommandWith(t *testing.T, objs []client.Object, funcs *interceptor.Funcs, width int, edit func(*Options), args ...string) result {
	t.Helper()
	// A tracker without managed fields: the fake client's field manager
	// cannot convert the uint64 raft fields of a member status.
	scheme := Scheme()
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	var out, errOut bytes.Buffer
	o := &Options{
		IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		NewClient: func() (client.Client, error) { return c, nil },
		Namespace: func() (string, error) { return testNamespace, nil },
		Now:       func() time.Time { return testNow },
		Width:     func() int { return width },
	}
	if edit != nil {
		edit(o)
	}
	cmd := newRootCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return result{out: out.String(), errOut: errOut.String(), err: err, client: c}
}
