package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func TestClusterReportsIgnoredEmptyDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(ctx, t), Name: "both-storages"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Storage: etcdv1alpha1.StorageSpec{
			EmptyDir: &corev1.EmptyDirVolumeSource{},
			VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}},
		}},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionConfigurationWarning, metav1.ConditionTrue, etcdv1alpha1.ReasonEmptyDirIgnored)
	if got, want := cluster.Status.Selector, etcdv1alpha1.LabelCluster+"=both-storages"; got != want {
		t.Errorf("status.selector = %q, want %q", got, want)
	}
	if !hasManagedStatus(cluster, TopologyFieldManager) {
		t.Errorf("status is not owned by field manager %s: %v", TopologyFieldManager, cluster.ManagedFields)
	}

	// Removing emptyDir clears the warning, keeping the condition's history.
	updateCluster(ctx, t, cluster, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.EmptyDir = nil })
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionConfigurationWarning, metav1.ConditionFalse, etcdv1alpha1.ReasonNoWarnings)
	if c := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionConfigurationWarning); c.ObservedGeneration != cluster.Generation {
		t.Errorf("condition observedGeneration = %d, want %d", c.ObservedGeneration, cluster.Generation)
	}
}

// updateCluster applies change to the newest version of cluster, again
// after a conflict: the reconcilers write the object too (finalizers,
// annotations), so an Update from an older read may be refused.
func updateCluster(ctx context.Context, t *testing.T, cluster *etcdv1alpha1.EtcdCluster, change func(*etcdv1alpha1.EtcdCluster)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		change(cluster)
		return k8sClient.Update(ctx, cluster)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func awaitCondition(ctx context.Context, t *testing.T, cluster *etcdv1alpha1.EtcdCluster, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("condition %s=%s (%s)", condType, status, reason), func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, condType)
		if c == nil {
			return fmt.Errorf("no %s condition in %v", condType, cluster.Status.Conditions)
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s is %s (%s): %s", condType, c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

func hasManagedStatus(obj client.Object, manager string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Subresource == "status" {
			return true
		}
	}
	return false
}

// TestClaimsThatCannotGrow grows the claim template of a cluster whose
// claims the API server will not resize (envtest binds no claim, and only
// bound claims may grow): the ConfigurationWarning condition names the
// claim and the API server's reason, and the claim keeps its size.
func TestClaimsThatCannotGrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(ctx, t), Name: "fixed"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Storage: etcdv1alpha1.StorageSpec{
			VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}},
		}},
	}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: "data-fixed-0"}
	eventually(t, 20*time.Second, "the seed's claim", func() error { return k8sClient.Get(ctx, key, claim) })

	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Storage.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionConfigurationWarning, metav1.ConditionTrue, etcdv1alpha1.ReasonClaimsNotExpandable)
	msg := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionConfigurationWarning).Message
	if want := "Claim data-fixed-0 cannot grow from 1Gi to 2Gi"; !strings.Contains(msg, want) {
		t.Errorf("warning %q does not say %q", msg, want)
	}
	if err := k8sClient.Get(ctx, key, claim); err != nil {
		t.Fatal(err)
	}
	if got := claim.Spec.Resources.Requests.Storage().String(); got != "1Gi" {
		t.Errorf("claim requests %s, want 1Gi kept", got)
	}
}

// TestForeignObjectsAreNotTakenOver creates, before a cluster, a client
// Service of its name that someone else owns: the operator does not take
// it over (no owner reference, its selector untouched) and says so in
// Ready; once it is deleted, the operator creates its own. The same for
// the seed's claim.
func TestForeignObjectsAreNotTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-taken-0"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	for _, obj := range []client.Object{svc, claim} {
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Spec: etcdv1alpha1.EtcdClusterSpec{
		Storage: etcdv1alpha1.StorageSpec{VolumeClaimTemplate: &etcdv1alpha1.EmbeddedPersistentVolumeClaim{Spec: claim.Spec}},
	}}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionReady, metav1.ConditionFalse, etcdv1alpha1.ReasonForeignObject)
	if msg := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionReady).Message; !strings.Contains(msg, "Service taken exists and does not belong to EtcdCluster taken") {
		t.Errorf("Ready says %q", msg)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.OwnerReferences) != 0 || svc.Spec.Selector["app"] != "theirs" {
		t.Errorf("the Service was taken over: owners %v, selector %v", svc.OwnerReferences, svc.Spec.Selector)
	}

	if err := k8sClient.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Ready to name the claim", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionReady); c == nil || c.Reason != etcdv1alpha1.ReasonForeignObject || !strings.Contains(c.Message, "PersistentVolumeClaim data-taken-0 exists") {
			return fmt.Errorf("Ready is %v", c)
		}
		return nil
	})
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.OwnerReferences) != 0 {
		t.Errorf("the claim was taken over: owners %v", claim.OwnerReferences)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatalf("the operator did not create its own Service once the foreign one was gone: %v", err)
	}
	if !metav1.IsControlledBy(svc, cluster) {
		t.Errorf("Service %s is not controlled by the cluster: %v", svc.Name, svc.OwnerReferences)
	}
}

// TestForeignPDBIsKept: a cluster without a PodDisruptionBudget template
// deletes its own PDB, never someone else's of its name.
func TestForeignPDBIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	theirs := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nopdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	if err := k8sClient.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nopdb"}}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	// A pass writes the status after the PDB's step.
	eventually(t, 30*time.Second, "a pass to report", func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		if meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) == nil {
			return fmt.Errorf("no Progressing condition yet")
		}
		return nil
	})
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("someone else's PodDisruptionBudget of the cluster's name: %v", err)
	}
}

// TestResumeStartsThePlan creates a paused cluster: no member Pod is
// created while it is paused. Removing the annotation changes no
// generation, yet the seed's Pod must follow: nothing else would wake a
// paused cluster's reconciler.
func TestResumeStartsThePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: newNamespace(ctx, t), Name: "resumed",
		Annotations: map[string]string{etcdv1alpha1.AnnotationPaused: "true"},
	}}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	awaitCondition(ctx, t, cluster, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused)
	seed := client.ObjectKey{Namespace: cluster.Namespace, Name: "resumed-0"}
	if err := k8sClient.Get(ctx, seed, &corev1.Pod{}); err == nil {
		t.Fatal("a paused cluster got its seed Pod")
	}
	generation := cluster.Generation
	patch := client.MergeFrom(cluster.DeepCopy())
	delete(cluster.Annotations, etcdv1alpha1.AnnotationPaused)
	if err := k8sClient.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	if cluster.Generation != generation {
		t.Fatalf("resuming changed the generation %d -> %d; this test needs it unchanged", generation, cluster.Generation)
	}
	eventually(t, 20*time.Second, "the seed's Pod once resumed", func() error { return k8sClient.Get(ctx, seed, &corev1.Pod{}) })
}

// TestRefusedServiceIsShown makes the API server refuse the cluster's
// Services (a ResourceQuota allows none): Ready and Progressing are False
// with reason ObjectRefused and the API server's message, and a Warning
// event says the same; once the quota is gone the operator creates the
// Services and the refusal clears. The operator once only logged it.
func TestRefusedServiceIsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}}
	if err := k8sClient.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// envtest runs no quota controller: the status it would write.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	if err := k8sClient.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"}}
	if err := k8sClient.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	const says = "the API server refused Service refused-headless"
	for _, condType := range []string{etcdv1alpha1.ConditionReady, etcdv1alpha1.ConditionProgressing} {
		awaitCondition(ctx, t, cluster, condType, metav1.ConditionFalse, etcdv1alpha1.ReasonObjectRefused)
		msg := meta.FindStatusCondition(cluster.Status.Conditions, condType).Message
		if !strings.Contains(msg, says) || !strings.Contains(msg, "exceeded quota: no-services") {
			t.Errorf("%s says %q, want %q and the API server's message", condType, msg, says)
		}
	}
	eventually(t, 20*time.Second, "a Warning event "+etcdv1alpha1.ReasonObjectRefused, func() error {
		return warned(ctx, cluster, etcdv1alpha1.ReasonObjectRefused, "exceeded quota: no-services")
	})

	if err := k8sClient.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the refusal to clear", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		for _, condType := range []string{etcdv1alpha1.ConditionReady, etcdv1alpha1.ConditionProgressing} {
			if c := meta.FindStatusCondition(cluster.Status.Conditions, condType); c == nil || c.Reason == etcdv1alpha1.ReasonObjectRefused {
				return fmt.Errorf("%s is %v", condType, c)
			}
		}
		return nil
	})
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "refused-headless"}, svc); err != nil {
		t.Errorf("the headless Service once the quota is gone: %v", err)
	}
}

// warned tells whether a Warning event with reason about cluster says
// what.
func warned(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, reason, says string) error {
	events := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, events, client.InNamespace(cluster.Namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range events.Items {
		if e.Regarding.Name == cluster.Name && e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Note, says) {
			return nil
		}
		seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
	}
	return fmt.Errorf("events %q", seen)
}
