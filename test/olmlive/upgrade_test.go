package olmlive

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// release makes version of the operator as a maintainer would, in a copy
// of the repository (`make bundle catalog VERSION=...`, with the
// repository's tools), and its bundle and catalog images for the local
// cluster (`make local-images`, into the repository's bin/images). It
// returns the catalog image.
func release(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	support.CopyFromRepo(t, env.Root, dir, "Makefile", "PROJECT", "go.mod", "go.sum", "api", "config", "bundle", "bundle.Dockerfile",
		"catalog", "catalog.Dockerfile", "hack/pin-created-at.sh", "hack/catalog", "internal/catalog",
		"hack/localcluster", "hack/cert-manager/go.mod", "hack/cert-manager/go.sum")
	tools := []string{"OPERATOR_SDK=" + os.Getenv("OPERATOR_SDK_BIN"), "OPM=" + os.Getenv("OPM_BIN"), "KUSTOMIZE=" + env.Bin("kustomize-v5.8.2")}
	for _, tool := range tools {
		if strings.HasSuffix(tool, "=") {
			t.Fatalf("%s is not set: run the tests with `make test`", strings.TrimSuffix(tool, "="))
		}
	}
	for _, target := range [][]string{{"bundle", "catalog"}, {"local-images", "LOCAL_IMAGES=" + filepath.Join(env.Root, "bin", "images")}} {
		// The copy's config/ is already generated: controller-gen is not
		// run, and no tool is rebuilt.
		args := append([]string{"--no-print-directory"}, target...)
		args = append(args, "VERSION="+version)
		args = append(args, tools...)
		args = append(args, "-o", "manifests")
		for _, tool := range tools {
			args = append(args, "-o", strings.SplitN(tool, "=", 2)[1])
		}
		cmd := exec.Command("make", args...)
		cmd.Dir = dir
		cmd.Env = support.WithoutMakeFlags(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return "ghcr.io/etcd-operator/etcd-operator-catalog:v" + version
}

// unknownEtcdImage is an etcd image no node has: members given it never
// start.
const unknownEtcdImage = "quay.io/coreos/etcd:v3.6.99"

// upgradeWaitsForARoll: with a roll of a user's cluster in progress (to an
// etcd image no node has, so it cannot end by itself), a new release in the
// catalog is held by OLM: the operator says Upgradeable=False, the new CSV
// stays Pending and the old one runs. Once the user puts the image back and
// the roll ends, OLM upgrades the operator by itself. A writer runs on the
// rolled cluster and on another one throughout: no acknowledged write is
// lost; the other cluster is Ready throughout, the rolled one from the end
// of its roll; no member is restarted by the upgrade.
func upgradeWaitsForARoll(ctx context.Context, t *testing.T, csv0 string, rolled, other *etcdv1alpha1.EtcdCluster) {
	catalog1 := release(t, "0.2.0")
	csv1 := "etcd-operator.v0.2.0"
	ns := "etcd-operator"

	rolledCli, otherCli := etcdClient(ctx, t, rolled), etcdClient(ctx, t, other)
	finishRolled := support.StartWriter(ctx, t, rolledCli)
	finishOther := support.StartWriter(ctx, t, otherCli)
	otherReady := readyWatch(ctx, other)
	otherPods := memberPods(ctx, t, other)

	// The image the cluster's members run: it was created without one.
	goodImage := builder.DefaultEtcdImage
	setImage := func(image string) {
		t.Helper()
		patch := client.MergeFrom(rolled.DeepCopy())
		rolled.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "etcd", Image: image}}
		if err := k8sClient.Patch(ctx, rolled, patch); err != nil {
			t.Fatal(err)
		}
	}
	setImage(unknownEtcdImage)
	support.Eventually(t, 2*time.Minute, "Upgradeable False, naming the rolling cluster", upgradeable(ctx, csv0, metav1.ConditionFalse, rolled.Namespace+"/"+rolled.Name))

	cs := &operatorsv1alpha1.CatalogSource{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: catalogNamespace, Name: "etcd-operator"}, cs); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cs.DeepCopy())
	cs.Spec.Image = catalog1
	if err := k8sClient.Patch(ctx, cs, patch); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	support.Eventually(t, 5*time.Minute, "OLM to hold "+csv1+" Pending because the operator is not upgradeable", func() error {
		next := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: csv1}, next); err != nil {
			return err
		}
		if next.Status.Phase != operatorsv1alpha1.CSVPhasePending || next.Status.Reason != "OperatorConditionNotUpgradeable" {
			return fmt.Errorf("CSV %s is %s (%s): %s", csv1, next.Status.Phase, next.Status.Reason, next.Status.Message)
		}
		return nil
	})
	t.Logf("%s held Pending %s after the catalog was published", csv1, time.Since(published).Round(100*time.Millisecond))
	// It stays held while the roll is stuck, and the old operator runs
	// (its CSV Replacing, once OLM has seen the new one).
	time.Sleep(15 * time.Second)
	held, old := &operatorsv1alpha1.ClusterServiceVersion{}, &operatorsv1alpha1.ClusterServiceVersion{}
	for name, c := range map[string]*operatorsv1alpha1.ClusterServiceVersion{csv0: old, csv1: held} {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			t.Fatal(err)
		}
	}
	if held.Status.Phase != operatorsv1alpha1.CSVPhasePending {
		t.Fatalf("during the roll, CSV %s is %s (%s), want Pending", csv1, held.Status.Phase, held.Status.Message)
	}
	if old.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded && old.Status.Phase != operatorsv1alpha1.CSVPhaseReplacing {
		t.Fatalf("during the roll, CSV %s is %s (%s), want Succeeded or Replacing", csv0, old.Status.Phase, old.Status.Message)
	}
	deploy := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: deploymentName}, deploy); err != nil {
		t.Fatal(err)
	}
	if deploy.Status.AvailableReplicas != 1 || !strings.Contains(deploy.Spec.Template.Spec.Containers[0].Image, ":v0.1.0") {
		t.Fatalf("during the roll, the operator is %s with %d available", deploy.Spec.Template.Spec.Containers[0].Image, deploy.Status.AvailableReplicas)
	}

	setImage(goodImage)
	support.Eventually(t, 3*time.Minute, "the roll to end: the cluster Ready with every member at "+goodImage, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(rolled), rolled); err != nil {
			return err
		}
		// Ready with every member updated, and the surge member that could
		// not start gone: no step left (Progressing False).
		if !clusterReady(rolled) || rolled.Status.UpdatedReplicas != *rolled.Spec.Replicas || meta.IsStatusConditionTrue(rolled.Status.Conditions, etcdv1alpha1.ConditionProgressing) {
			return fmt.Errorf("updated %d of %d; conditions %+v", rolled.Status.UpdatedReplicas, *rolled.Spec.Replicas, rolled.Status.Conditions)
		}
		if pods := memberPods(ctx, t, rolled); len(pods) != int(*rolled.Spec.Replicas) {
			return fmt.Errorf("member Pods %v", pods)
		}
		return nil
	})
	rolledPods := memberPods(ctx, t, rolled)
	rolledReady := readyWatch(ctx, rolled)
	ended := time.Now()
	support.Eventually(t, 5*time.Minute, "OLM to upgrade the operator to "+csv1, func() error {
		next := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: csv1}, next); err != nil {
			return err
		}
		if next.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("CSV %s is %s (%s): %s", csv1, next.Status.Phase, next.Status.Reason, next.Status.Message)
		}
		old := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: csv0}, old); err == nil {
			return fmt.Errorf("CSV %s is still there (%s)", csv0, old.Status.Phase)
		}
		return nil
	})
	t.Logf("%s Succeeded %s after the roll ended", csv1, time.Since(ended).Round(100*time.Millisecond))
	support.Eventually(t, time.Minute, "the new operator to say it is upgradeable", upgradeable(ctx, csv1, metav1.ConditionTrue, "No EtcdCluster is changing"))
	// The new operator has reconciled both clusters: let the writers and
	// the watches run a little longer under it.
	time.Sleep(10 * time.Second)
	if err := otherReady(); err != nil {
		t.Errorf("during the upgrade, %v", err)
	}
	if err := rolledReady(); err != nil {
		t.Errorf("from the end of the roll, %v", err)
	}
	finishRolled()
	finishOther()
	for c, before := range map[*etcdv1alpha1.EtcdCluster]map[string]string{rolled: rolledPods, other: otherPods} {
		if after := memberPods(ctx, t, c); !maps.Equal(before, after) {
			t.Errorf("the upgrade restarted members of %s/%s: before %v, after %v", c.Namespace, c.Name, before, after)
		}
	}
}
