package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		return etcd.New(cfg)
	}
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
