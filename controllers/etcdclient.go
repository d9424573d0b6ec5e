package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// EtcdClientFactory connects to the members of a cluster at endpoints,
// with the cluster's client TLS when it has any.
type EtcdClientFactory func(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string) (etcd.Client, error)

// NewEtcdClientFactory is the EtcdClientFactory of the real etcd client. It
// reads the CA that signed the members' serving certificate and the
// operator's client certificate from the cluster's Secrets through reader
// on every call, so renewed certificates are used from the next pass on.
func NewEtcdClientFactory(reader client.Reader) EtcdClientFactory {
	return func(ctx context.Context, c *etcdv1alpha1.EtcdCluster, endpoints []string) (etcd.Client, error) {
		cfg := etcd.Config{Endpoints: endpoints, DialTimeout: 3 * time.Second, CallTimeout: 5 * time.Second}
		if c.Spec.Security.ClientTLS() {
			tlsCfg, err := clientTLSConfig(ctx, reader, c)
			if err != nil {
				return nil, err
			}
			cfg.TLS = tlsCfg
		}
		if !c.Spec.Security.OperatorClientCert() {
			password, err := rootPassword(ctx, reader, c)
			if err != nil {
				return nil, err
			}
			if password != "" {
				cfg.Username, cfg.Password = etcd.RootUser, password
			}
		}
		return etcd.New(cfg)
	}
}

// errNoMemberPods is connectMembers' error for a cluster without member
// Pods.
var errNoMemberPods = errors.New("the cluster has no member Pods")

// connectMembers connects to the members of c at the client URLs of its
// member Pods; the caller closes the client. Members are found through
// their Pods, not the cluster's status, so a reconciler other than the
// topology one needs no fresh status to reach them.
func connectMembers(ctx context.Context, reader client.Reader, connect EtcdClientFactory, c *etcdv1alpha1.EtcdCluster) (etcd.Client, error) {
	pods, err := memberPods(ctx, reader, c)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, errNoMemberPods
	}
	return connect(ctx, c, memberURLs(c, podNames(pods)))
}

// rootPassword reads root's password from the cluster's root password
// Secret; "" when there is none (auth was never turned on). It is read
// whatever spec.security.enableAuth says: turning auth off takes root.
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
