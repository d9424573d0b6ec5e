package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// Keys of a tenant's connection Secret besides the kubernetes.io/tls and
// basic-auth ones (tls.crt, tls.key, ca.crt, username, password).
const (
	keyEndpoints = "endpoints"
	keyPrefix    = "prefix"
)

// tenantBlocker says why tenant t may not use cluster c (nil when it does
// not exist), as the API objects tell: c, and the other tenants of the
// namespace; "" when nothing there stands in the way (authBlocker then
// asks etcd). Every reason names what to do, and each is a refusal: the
// tenant holds no etcd user or role while it lasts.
func tenantBlocker(t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster, others []etcdv1alpha1.EtcdTenant) (reason, message string) {
	if c == nil || !c.DeletionTimestamp.IsZero() {
		return etcdv1alpha1.ReasonClusterNotFound, fmt.Sprintf("EtcdCluster %s does not exist in namespace %s: create it, or fix spec.clusterName", t.Spec.ClusterName, t.Namespace)
	}
	if other := overlappingTenant(t, others); other != nil {
		return etcdv1alpha1.ReasonPrefixOverlap, fmt.Sprintf("Prefix %s overlaps prefix %s of EtcdTenant %s, which came first on EtcdCluster %s: give this tenant a prefix neither starts the other", t.EffectivePrefix(), other.EffectivePrefix(), other.Name, c.Name)
	}
	if c.Spec.Security.ClientCertAuth() && !c.Spec.Security.ManagedTLS() {
		return etcdv1alpha1.ReasonNoIssuer, fmt.Sprintf("EtcdCluster %s requires client certificates signed by the CA in Secret %s, which the operator cannot issue: use spec.security.tls.certManager on the cluster", c.Name, c.Spec.Security.TLS.ClientTrustedCASecret)
	}
	return "", ""
}

// authBlocker says why a tenant may not use cluster c while etcd's
// authentication is on or not (authOn, as etcd itself answers), or ""
// when it is on. Without it any client could read every tenant's keys.
// It is on whenever the spec asks, once the operator has turned it on,
// and also while the spec no longer asks but tenants keep it on
// (planAuth): a tenant keeps working until it is deleted.
func authBlocker(c *etcdv1alpha1.EtcdCluster, authOn bool) (reason, message string) {
	switch {
	case authOn:
		return "", ""
	case !c.Spec.Security.AuthEnabled():
		return etcdv1alpha1.ReasonAuthDisabled, fmt.Sprintf("EtcdCluster %s runs without etcd authentication, so any client could read every tenant's keys: set spec.security.enableAuth: true on it", c.Name)
	}
	why := "the operator has not turned it on yet"
	if auth := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAuthentication); auth != nil && auth.Status != metav1.ConditionTrue {
		why = auth.Message
	}
	return etcdv1alpha1.ReasonWaitingForAuth, fmt.Sprintf("Waiting for etcd authentication on EtcdCluster %s: %s", c.Name, why)
}

// overlappingTenant is the tenant among others, on the same cluster and
// not being deleted, whose prefix overlaps t's and which came first: of
// two overlapping tenants the older one keeps its prefix and its access
// and t is refused. Creation times have a resolution of one second; of
// two created in the same second, the one whose name sorts first counts
// as older. A tenant being deleted yields to the others.
func overlappingTenant(t *etcdv1alpha1.EtcdTenant, others []etcdv1alpha1.EtcdTenant) *etcdv1alpha1.EtcdTenant {
	sorted := slices.Clone(others)
	slices.SortFunc(sorted, func(a, b etcdv1alpha1.EtcdTenant) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range sorted {
		o := &sorted[i]
		if o.Name == t.Name {
			return nil // every one before t was checked
		}
		if o.Spec.ClusterName == t.Spec.ClusterName && o.DeletionTimestamp.IsZero() && etcdv1alpha1.PrefixesOverlap(o.EffectivePrefix(), t.EffectivePrefix()) {
			return o
		}
	}
	return nil
}

// tenantPasswordMode tells whether tenant t of cluster c gets a password:
// always without a client certificate to give it, else when it asks.
func tenantPasswordMode(t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster) bool {
	return !c.Spec.Security.ManagedTLS() || t.Spec.Password
}

// connectionData is the content of a tenant's connection Secret: what a
// consumer needs and nothing else. ca and cert are the cluster's CA
// Secret and the tenant's certificate Secret (nil when unused).
func connectionData(t *etcdv1alpha1.EtcdTenant, c *etcdv1alpha1.EtcdCluster, ca, cert *corev1.Secret, password string) map[string][]byte {
	data := map[string][]byte{
		keyEndpoints: []byte(builder.ClientEndpoint(c)),
		keyPrefix:    []byte(t.EffectivePrefix()),
	}
	if ca != nil {
		data[builder.CAKey] = ca.Data[builder.CAKey]
	}
	if cert != nil {
		data[corev1.TLSCertKey] = cert.Data[corev1.TLSCertKey]
		data[corev1.TLSPrivateKeyKey] = cert.Data[corev1.TLSPrivateKeyKey]
	}
	if password != "" {
		data[corev1.BasicAuthUsernameKey] = []byte(t.UserName())
		data[corev1.BasicAuthPasswordKey] = []byte(password)
	}
	return data
}

// tenantReady is the Ready condition of a tenant.
func tenantReady(t *etcdv1alpha1.EtcdTenant, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: etcdv1alpha1.ConditionReady, Status: status, Reason: reason, Message: message, ObservedGeneration: t.Generation}
}
