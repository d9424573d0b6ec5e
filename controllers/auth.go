package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// Reasons of the Authentication condition.
const (
	reasonAuthEnabled  = "Enabled"
	reasonAuthDisabled = "Disabled"
	reasonNotFormed    = "NotFormed"
)

// authRecheck is how soon the PKI reconciler looks again while it cannot
// reach etcd to turn authentication on or off.
const authRecheck = 5 * time.Second

// authentication makes etcd's authentication match spec.security.enableAuth
// once the cluster has formed and its certificates are ready: on, with a
// root user that has no password and authenticates by the CN of the
// operator's client certificate (root); off again when the field is
// cleared. It returns the Authentication condition and how soon to look
// again (0 when it is done).
func (r *PKIReconciler) authentication(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (metav1.Condition, time.Duration, error) {
	want := c.Spec.Security.AuthEnabled()
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, ObservedGeneration: c.Generation}
	unknown := func(reason, msg string) (metav1.Condition, time.Duration, error) {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, reason, msg
		return cond, authRecheck, nil
	}
	if c.Status.ClusterID == "" {
		return unknown(reasonNotFormed, "The cluster has not formed yet")
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(builder.MemberSelectorLabels(c))); err != nil {
		return cond, 0, err
	}
	var names []string
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], c) {
			names = append(names, pods.Items[i].Name)
		}
	}
	if len(names) == 0 {
		return unknown(reasonUnreachable, "No member Pods")
	}
	ec, err := r.NewEtcdClient(ctx, c, memberURLs(c, names))
	if err != nil {
		return unknown(reasonUnreachable, err.Error())
	}
	defer func() { _ = ec.Close() }()
	on, err := ec.AuthEnabled(ctx)
	if err != nil {
		return unknown(reasonUnreachable, err.Error())
	}
	switch {
	case want && !on:
		if err := ec.EnableAuth(ctx); err != nil {
			return unknown(reasonUnreachable, "Enabling authentication: "+err.Error())
		}
		r.event(c, corev1.EventTypeNormal, "AuthEnabled", "Enabled etcd authentication with the root user, authenticated by client certificate CN root")
	case !want && on:
		if err := ec.DisableAuth(ctx); err != nil {
			return unknown(reasonUnreachable, "Disabling authentication: "+err.Error())
		}
		r.event(c, corev1.EventTypeNormal, "AuthDisabled", "Disabled etcd authentication: spec.security.enableAuth is off")
	}
	if want {
		cond.Status, cond.Reason = metav1.ConditionTrue, reasonAuthEnabled
		cond.Message = "etcd authentication is on: only the root user (the operator, by its client certificate's CN root) and users granted roles may read and write"
		return cond, 0, nil
	}
	cond.Status, cond.Reason = metav1.ConditionFalse, reasonAuthDisabled
	cond.Message = "etcd authentication is off: every client the client CA vouches for may read and write everything; set spec.security.enableAuth to turn it on"
	return cond, 0, nil
}
