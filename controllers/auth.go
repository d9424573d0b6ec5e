package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// client certificate; off again when the field is cleared, but not while
// EtcdTenants name the cluster (planAuth). It returns the Authentication
// condition and how soon to look again (0 when it is done).
func (r *PKIReconciler) authentication(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (metav1.Condition, time.Duration, error) {
	unknown := func(reason, msg string) (metav1.Condition, time.Duration, error) {
		return authUnknown(c, reason, msg), authRecheck, nil
	}
	if c.Status.ClusterID == "" {
		// The cluster's formation (status.clusterID set) starts a pass:
		// the reconciler watches it (clusterIDChanged).
		return authBeforeFormation(c), 0, nil
	}
	tenants, err := tenantNames(ctx, r.Client, c)
	if err != nil {
		return metav1.Condition{}, 0, err
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
	switch planAuth(c, on, tenants) {
	case authEnable:
		password := ""
		if !c.Spec.Security.OperatorClientCert() {
			if password, err = ensureRootPassword(ctx, r.Client, c); err != nil {
				return metav1.Condition{}, 0, err
			}
		}
		if err := ec.EnableAuth(ctx, password); err != nil {
			return unknown(etcdv1alpha1.ReasonUnreachable, "Enabling authentication: "+err.Error())
		}
		on = true
		r.event(c, corev1.EventTypeNormal, "AuthEnabled", "Enabled etcd authentication with the root user, authenticated by %s", rootIdentity(c))
	case authDisable:
		if err := ec.DisableAuth(ctx); err != nil {
			return unknown(etcdv1alpha1.ReasonUnreachable, "Disabling authentication: "+err.Error())
		}
		on = false
		r.event(c, corev1.EventTypeNormal, "AuthDisabled", "Disabled etcd authentication: spec.security.enableAuth is off")
	}
	cond := authCondition(c, on, tenants)
	if old := meta.FindStatusCondition(c.Status.Conditions, cond.Type); cond.Reason == etcdv1alpha1.ReasonTenantsExist && (old == nil || old.Reason != cond.Reason || old.Message != cond.Message) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonTenantsExist, "Refusing to turn etcd authentication off: %s", cond.Message)
	}
	return cond, 0, nil
}

// authStep is the change a pass makes to etcd's authentication.
type authStep string

const (
	authKeep    authStep = "Keep"
	authEnable  authStep = "Enable"
	authDisable authStep = "Disable"
)

// planAuth is the change that makes etcd's authentication, on or not,
// what spec.security.enableAuth asks, with one exception: it is not
// turned off while tenants (the EtcdTenants naming c, those being deleted
// included) exist. Without it every client may read and write every
// tenant's keys, and a tenant being deleted is still torn down as root:
// its user, role and, with retentionPolicy Delete, its keys.
func planAuth(c *etcdv1alpha1.EtcdCluster, on bool, tenants []string) authStep {
	want := c.Spec.Security.AuthEnabled()
	switch {
	case want && !on:
		return authEnable
	case !want && on && len(tenants) == 0:
		return authDisable
	}
	return authKeep
}

// authCondition is the Authentication condition of c once a pass has
// taken planAuth's step and etcd's authentication is on or not, with
// tenants naming c: True while on as the spec asks; False while off as it
// asks, or (TenantsExist) while kept on against it, naming the tenants
// and what to do.
func authCondition(c *etcdv1alpha1.EtcdCluster, on bool, tenants []string) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, Status: metav1.ConditionFalse, ObservedGeneration: c.Generation}
	switch {
	case on && c.Spec.Security.AuthEnabled():
		cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonEnabled
		cond.Message = "etcd authentication is on: only the root user (the operator, by " + rootIdentity(c) + ") and users granted roles may read and write"
	case on:
		cond.Reason = etcdv1alpha1.ReasonTenantsExist
		cond.Message = fmt.Sprintf("etcd authentication stays on although spec.security.enableAuth is false: without it every client could read and write the keys of this cluster's tenants (%s). "+
			"To turn it off, delete the cluster's EtcdTenants first: it goes off once they are gone. To keep it, set spec.security.enableAuth: true", namedTenants(tenants))
	default:
		cond.Reason = etcdv1alpha1.ReasonDisabled
		cond.Message = "etcd authentication is off: every client that reaches the members may read and write everything; set spec.security.enableAuth to turn it on"
	}
	return cond
}

// namedTenants names tenants the way a message reads: "EtcdTenant a",
// "EtcdTenants a, b".
func namedTenants(tenants []string) string {
	if len(tenants) == 1 {
		return "EtcdTenant " + tenants[0]
	}
	return "EtcdTenants " + strings.Join(tenants, ", ")
}

// authBeforeFormation is the Authentication condition of c before the
// cluster has formed, when there is no etcd to ask: off (Disabled) when
// the spec does not ask for it, since a cluster the operator founds
// starts without authentication and nothing turns it on; Unknown
// (NotFormed) when it asks, saying when it goes on.
func authBeforeFormation(c *etcdv1alpha1.EtcdCluster) metav1.Condition {
	if !c.Spec.Security.AuthEnabled() {
		return authCondition(c, false, nil)
	}
	return authUnknown(c, etcdv1alpha1.ReasonNotFormed, "The cluster has not formed yet: etcd authentication is turned on once the cluster has formed")
}

// authUnknown is the Authentication condition of c while the operator
// cannot tell or change etcd's authentication: Unknown, for reason.
func authUnknown(c *etcdv1alpha1.EtcdCluster, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: etcdv1alpha1.ConditionAuthentication, Status: metav1.ConditionUnknown, Reason: reason, Message: msg, ObservedGeneration: c.Generation}
}

// tenantNames are the names of the EtcdTenants naming cluster c, those
// being deleted included, sorted.
func tenantNames(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) ([]string, error) {
	tenants := &etcdv1alpha1.EtcdTenantList{}
	if err := reader.List(ctx, tenants, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	var names []string
	for _, t := range tenants.Items {
		if t.Spec.ClusterName == c.Name {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return names, nil
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
// A cluster restored from a backup gets it before its seed restores
// (root's password is set in the restored data).
func ensureRootPassword(ctx context.Context, r client.Client, c *etcdv1alpha1.EtcdCluster) (string, error) {
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
