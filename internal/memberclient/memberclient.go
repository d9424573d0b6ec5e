// Package memberclient is how the operator and the kubectl plugin reach
// a cluster's members: the client configuration of an EtcdCluster, from
// its Secrets, so both connect the same way.
package memberclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
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

// Config is the client configuration for the members of c at endpoints:
// the CA that signed the members' serving certificate and the operator's
// client certificate when clients use TLS, root's password when the
// cluster has one and the operator does not authenticate by certificate
// (and etcd's authentication may be on: authMayBeOn). It reads the Secrets
// through reader on every call, so renewed certificates are used from the
// next call on.
func Config(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster, endpoints []string) (etcd.Config, error) {
	cfg := etcd.Config{Endpoints: endpoints, DialTimeout: 3 * time.Second, CallTimeout: 5 * time.Second}
	if c.Spec.Security.ClientTLS() {
		tlsCfg, err := clientTLSConfig(ctx, reader, c)
		if err != nil {
			return etcd.Config{}, err
		}
		cfg.TLS = tlsCfg
	}
	if !c.Spec.Security.OperatorClientCert() && authMayBeOn(c) {
		password, err := rootPassword(ctx, reader, c)
		if err != nil {
			return etcd.Config{}, err
		}
		if password != "" {
			cfg.Username, cfg.Password = etcd.RootUser, password
		}
	}
	return cfg, nil
}

// authMayBeOn tells whether etcd's authentication may be on in cluster c:
// false only when the spec asks for it off and the Authentication
// condition says, for the current generation, that it is off as asked.
// The operator turns it on only when the spec asks (and a restore turns
// it off in the restored data when the spec does not), so it cannot be on
// then. Anything else (spec on, the condition stale, unknown, or kept on
// for tenants) may be on, and root's password is read. Skipping the read
// matters: the Secret does not exist on such a cluster, so the manager's
// client asks the API server for it on every probe (controllers'
// liveFallback), which was a tenth of the operator's CPU at rest with 100
// clusters.
func authMayBeOn(c *etcdv1alpha1.EtcdCluster) bool {
	if c.Spec.Security.AuthEnabled() {
		return true
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAuthentication)
	return cond == nil || cond.ObservedGeneration != c.Generation ||
		cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1alpha1.ReasonDisabled
}

// rootPassword reads root's password from the cluster's root password
// Secret; "" when there is none (auth was never turned on). Where auth may
// be on it is read whatever spec.security.enableAuth says: turning auth
// off takes root.
func rootPassword(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) (string, error) {
	s := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.RootPasswordSecretName(c)}, s)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the root password Secret: %w", err)
	}
	return string(s.Data[corev1.BasicAuthPasswordKey]), nil
}

// clientTLSConfig is the operator's TLS configuration for a cluster: the
// members' CA and, when the cluster has one, the operator's client
// certificate.
func clientTLSConfig(ctx context.Context, reader client.Reader, c *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	src := builder.TLSSourcesOf(c)
	read := func(k builder.SecretKey) ([]byte, error) {
		s := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: k.Secret}, s); err != nil {
			return nil, fmt.Errorf("reading the client TLS Secret %s: %w", k.Secret, err)
		}
		if len(s.Data[k.Key]) == 0 {
			return nil, fmt.Errorf("secret %s has no %s", k.Secret, k.Key)
		}
		return s.Data[k.Key], nil
	}
	caPEM, err := read(src.ServerCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("secret %s: %s holds no PEM certificate", src.ServerCA.Secret, src.ServerCA.Key)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if src.ClientCert.IsSet() {
		certPEM, err := read(src.ClientCert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := read(src.ClientKey)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", src.ClientCert.Secret, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
