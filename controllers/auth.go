package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// authRecheck is how soon the PKI reconciler looks again while it cannot
// reach etcd to turn authentication on or off.
const authRecheck = 5 * time.Second

// authentication makes etcd's authentication match spec.security.enableAuth
// once the cluster has formed and its certificates (if any) are ready: on,
// with a root user that authenticates by the CN of the operator's client
// certificate (root), or by a generated password when the operator has no
// client certificate; off again when the field is cleared. It returns the
// Authentication condition and how soon to look again (0 when it is done).
func (r *PKIReconciler) authentication(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (metav1.Condition, time.Duration, error) {
	want := c.Spec.Security.AuthEnabled()
	unknown := func(reason, msg string) (metav1.Condition, time.Duration, error) {
		return authCondition(c, reason, msg), authRecheck, nil
	}
	if c.Status.ClusterID == "" {
		return unknown(etcdv1alpha1.ReasonNotFormed, "The cluster has not formed yet")
	}
	ec, err := connectMembers(ctx, r.Client, r.NewEtcdClient, c)
	if errors.Is(err, errNoMemberPods) {
		return unknown(etcdv1alpha1.ReasonUnreachable, "No member Pods")
	}
	if err != nil {
		return unknown(etcdv1alpha1.ReasonUnreachable, err.Error())
	}
	defer func() { _ = ec.Close() }()
	on, err := ec.AuthEnabled(ctx)
	if err != nil {
		return unknown(etcdv1alpha1.ReasonUnreachable, err.Error())
	}
	switch {
	case want && !on:
		password := ""
		if !c.Spec.Security.OperatorClientCert() {
			if password, err = r.ensureRootPassword(ctx, c); err != nil {
				return metav1.Condition{}, 0, err
			}
		}
		if err := ec.EnableAuth(ctx, password); err != nil {
			return unknown(etcdv1alpha1.ReasonUnreachable, "Enabling authentication: "+err.Error())
		}
		r.event(c, corev1.EventTypeNormal, "AuthEnabled", "Enabled etcd authentication with the root user, authenticated by %s", rootIdentity(c))
	case !want && on:
		if err := ec.DisableAuth(ctx); err != nil {
			return unknown(etcdv1alpha1.ReasonUnreachable, "Disabling authentication: "+err.Error())
		}
		r.event(c, corev1.EventTypeNormal, "AuthDisabled", "Disabled etcd authentication: spec.security.enableAuth is off")
	}
	return authCondition(c, "", ""), 0, nil
}

// authCondition is the Authentication condition of c: Unknown for
// unknownReason with msg while the operator cannot tell or change etcd's
// authentication, else whether it is on, as spec.security.enableAuth asks.
func authCondition(c *etcdv1alpha1.EtcdCluster, unknownReason, msg string) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, ObservedGeneration: c.Generation}
	switch {
	case unknownReason != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, unknownReason, msg
	case c.Spec.Security.AuthEnabled():
		cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonEnabled
		cond.Message = "etcd authentication is on: only the root user (the operator, by " + rootIdentity(c) + ") and users granted roles may read and write"
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonDisabled
		cond.Message = "etcd authentication is off: every client that reaches the members may read and write everything; set spec.security.enableAuth to turn it on"
	}
	return cond
}

// rootIdentity says how root authenticates on cluster c.
func rootIdentity(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Security.OperatorClientCert() {
		return "its client certificate's CN root"
	}
	return "the password in Secret " + builder.RootPasswordSecretName(c)
}

// ensureRootPassword returns root's password from the cluster's root
// password Secret, creating the Secret with a new password first when
// there is none. The Secret is written before etcd is told the password,
// so an interruption never leaves a password nobody knows.
func (r *PKIReconciler) ensureRootPassword(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (string, error) {
	key := client.ObjectKey{Namespace: c.Namespace, Name: builder.RootPasswordSecretName(c)}
	s := &corev1.Secret{}
	err := r.Get(ctx, key, s)
	if err == nil && len(s.Data[corev1.BasicAuthPasswordKey]) > 0 {
		return string(s.Data[corev1.BasicAuthPasswordKey]), nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	password, err := newPassword()
	if err != nil {
		return "", err
	}
	s = &corev1.Secret{
		ObjectMeta: builder.ObjectMeta(c, key.Name, etcdv1alpha1.EmbeddedObjectMetadata{}),
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{corev1.BasicAuthUsernameKey: []byte(etcd.RootUser), corev1.BasicAuthPasswordKey: []byte(password)},
	}
	if err := r.Create(ctx, s); err != nil {
		return "", fmt.Errorf("creating the root password Secret %s: %w", key.Name, err)
	}
	return password, nil
}

// newPassword is 32 random bytes, base64url-encoded.
func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
