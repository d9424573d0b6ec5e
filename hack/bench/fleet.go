package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// The fleet scenario: one operator with many clusters.
var (
	// fleetRunning clusters of 1 member run at once.
	fleetRunning = 100
	// fleetIdle clusters follow them, whose members never start (their
	// Pods ask for a node that does not exist), so what is measured is the
	// operator's own cost per EtcdCluster.
	fleetIdle = 1000
)

// Measured once a fleet is in place.
const (
	fleetRestWindow  = 30 * time.Second
	fleetDrain       = 90 * time.Second
	fleetSpecChanges = 5
	fleetLabel       = "bench.etcd.aenix.io/fleet"
)

// fleet runs fleetRunning clusters of 1 member, then, once they are gone,
// fleetIdle clusters whose members never start; with each in place it
// prints the operator's memory and CPU at rest and how long a spec change
// on one cluster takes to reach that cluster's Service.
func (b *bench) fleet(ctx context.Context) error {
	fmt.Printf("\nOne operator with many clusters\n\n")
	for _, idle := range []bool{false, true} {
		n, what := fleetRunning, "running clusters of 1 member"
		if idle {
			n, what = fleetIdle, "clusters whose members never start"
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "fleet: %d %s\n", n, what)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-fleet-"}}
		if err := b.c.Create(ctx, ns); err != nil {
			return err
		}
		err := b.fleetOf(ctx, ns.Name, n, idle, what)
		if derr := b.deleteFleet(ctx, ns); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) fleetOf(ctx context.Context, ns string, n int, idle bool, what string) error {
	start := time.Now()
	if err := b.createFleet(ctx, ns, n, idle); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  created in %s\n", time.Since(start).Round(100*time.Millisecond))
	// Running clusters are in place when all are Ready; idle ones when the
	// operator has given each its member Pod and observed its generation.
	if err := b.pollEvery(ctx, 2*time.Second, 20*time.Minute, func() error { return b.fleetSettled(ctx, ns, n, idle) }); err != nil {
		return err
	}
	settled := time.Since(start)
	fmt.Fprintf(os.Stderr, "  in place in %s\n", settled.Round(100*time.Millisecond))
	rss, cpu, err := b.operatorAtRest(fmt.Sprintf("fleet-%d", n), fleetRestWindow)
	if err != nil {
		return err
	}
	// Right after the fleet is in place, passes asked for while it was
	// being created still come due (a wait is looked at again up to
	// maxWaitRequeue, 30 s, later); once they have, what is left is what
	// the fleet costs for as long as it stays.
	time.Sleep(fleetDrain)
	laterRSS, laterCPU, err := b.operatorAtRest(fmt.Sprintf("fleet-%d-later", n), fleetRestWindow)
	if err != nil {
		return err
	}
	changes, err := b.specChanges(ctx, client.ObjectKey{Namespace: ns, Name: fleetName(n / 2)})
	if err != nil {
		return err
	}
	slices.Sort(changes)
	label := fmt.Sprintf("%d %s", n, what)
	fmt.Printf("%-58s %8s\n", label+": apply to in place", settled.Round(100*time.Millisecond))
	fmt.Printf("%-58s %8s\n", "  operator memory (RSS)", rss)
	fmt.Printf("%-58s %8s\n", fmt.Sprintf("  operator CPU at rest (%s)", fleetRestWindow), cpu)
	fmt.Printf("%-58s %8s\n", fmt.Sprintf("  %s after in place: operator memory (RSS)", fleetRestWindow+fleetDrain), laterRSS)
	fmt.Printf("%-58s %8s\n", fmt.Sprintf("  %s after in place: CPU at rest (%s)", fleetRestWindow+fleetDrain, fleetRestWindow), laterCPU)
	fmt.Printf("%-58s %8s [%s, %s]\n", fmt.Sprintf("  spec change to its Service, median of %d", len(changes)),
		changes[len(changes)/2].Round(10*time.Millisecond), changes[0].Round(10*time.Millisecond), changes[len(changes)-1].Round(10*time.Millisecond))
	return nil
}

func fleetName(i int) string { return fmt.Sprintf("f%04d", i) }

// createFleet creates n clusters of 1 member in ns, eight at a time.
func (b *bench) createFleet(ctx context.Context, ns string, n int, idle bool) error {
	return eightAtOnce(n, func(i int) error {
		c := b.cluster(fleetName(i), 1, false)
		c.Namespace = ns
		c.Labels = map[string]string{fleetLabel: "true"}
		if idle {
			c.Spec.PodTemplate.Spec.NodeSelector = map[string]string{"bench.etcd.aenix.io/node": "none"}
		}
		return b.c.Create(ctx, c)
	})
}

// fleetSettled says whether the n clusters in ns are in place: every one
// Ready (running), or every one with its member Pod and its generation
// observed (idle).
func (b *bench) fleetSettled(ctx context.Context, ns string, n int, idle bool) error {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := b.c.List(ctx, clusters, client.InNamespace(ns)); err != nil {
		return err
	}
	settled := 0
	for _, c := range clusters.Items {
		ready := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionReady)
		switch {
		case ready == nil || ready.ObservedGeneration != c.Generation:
		case idle || ready.Status == metav1.ConditionTrue:
			settled++
		}
	}
	if idle {
		pods := &corev1.PodList{}
		if err := b.c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		settled = min(settled, len(pods.Items))
	}
	if settled < n {
		return fmt.Errorf("%d of %d clusters in place", settled, n)
	}
	return nil
}

// specChanges changes the client Service's annotations in the spec of
// cluster key fleetSpecChanges times and returns how long each took to
// reach the Service.
func (b *bench) specChanges(ctx context.Context, key client.ObjectKey) ([]time.Duration, error) {
	var took []time.Duration
	for i := range fleetSpecChanges {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := b.c.Get(ctx, key, c); err != nil {
			return nil, err
		}
		value := strconv.Itoa(i)
		patch := client.MergeFrom(c.DeepCopy())
		if c.Spec.ServiceTemplate == nil {
			c.Spec.ServiceTemplate = &etcdv1alpha1.ServiceTemplate{}
		}
		c.Spec.ServiceTemplate.Annotations = map[string]string{"bench.etcd.aenix.io/change": value}
		start := time.Now()
		if err := b.c.Patch(ctx, c, patch); err != nil {
			return nil, err
		}
		err := b.pollEvery(ctx, 20*time.Millisecond, time.Minute, func() error {
			svc := &corev1.Service{}
			if err := b.c.Get(ctx, key, svc); err != nil {
				return err
			}
			if svc.Annotations["bench.etcd.aenix.io/change"] != value {
				return fmt.Errorf("service %s does not carry change %s yet", key, value)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}

// deleteFleet deletes ns and waits until it is gone, so the next fleet is
// measured alone.
func (b *bench) deleteFleet(ctx context.Context, ns *corev1.Namespace) error {
	if err := b.c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	start := time.Now()
	err := b.pollEvery(ctx, time.Second, 20*time.Minute, func() error {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s is still there", ns.Name)
	})
	fmt.Fprintf(os.Stderr, "  namespace %s gone in %s\n", ns.Name, time.Since(start).Round(100*time.Millisecond))
	return err
}
