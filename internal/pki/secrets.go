package pki

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
)

// Need is one Secret a cluster's TLS uses and the keys it must hold.
type Need struct {
	Secret string
	Keys   []string
}

// Needs are the Secrets a cluster's TLS uses, by name, with their keys.
func Needs(s builder.TLSSources) []Need {
	keys := map[string]map[string]bool{}
	for _, k := range []builder.SecretKey{s.ServerCert, s.ServerKey, s.ServerCA, s.ClientCA, s.ClientCert, s.ClientKey, s.PeerCert, s.PeerKey, s.PeerCA} {
		if !k.IsSet() {
			continue
		}
		if keys[k.Secret] == nil {
			keys[k.Secret] = map[string]bool{}
		}
		keys[k.Secret][k.Key] = true
	}
	needs := make([]Need, 0, len(keys))
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		needs = append(needs, Need{Secret: name, Keys: slices.Sorted(maps.Keys(keys[name]))})
	}
	return needs
}

// Check checks a Secret (nil when it does not exist) against what the
// cluster needs of it: every key present, certificates that parse, a
// certificate that matches its key. It returns when the first of its
// certificates expires.
func Check(n Need, s *corev1.Secret) (time.Time, error) {
	if s == nil {
		return time.Time{}, fmt.Errorf("Secret %s does not exist", n.Secret) //nolint:staticcheck // names a Kubernetes kind
	}
	var missing []string
	for _, k := range n.Keys {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return time.Time{}, fmt.Errorf("Secret %s has no %s", n.Secret, strings.Join(missing, " and no ")) //nolint:staticcheck // names a Kubernetes kind
	}
	var expiry time.Time
	for _, k := range n.Keys {
		if k == builder.PrivateKeyKey {
			continue
		}
		certs, err := parseCerts(s.Data[k])
		if err != nil {
			return time.Time{}, fmt.Errorf("Secret %s: %s: %w", n.Secret, k, err) //nolint:staticcheck // names a Kubernetes kind
		}
		for _, c := range certs {
			if expiry.IsZero() || c.NotAfter.Before(expiry) {
				expiry = c.NotAfter
			}
		}
	}
	if slices.Contains(n.Keys, builder.CertKey) && slices.Contains(n.Keys, builder.PrivateKeyKey) {
		if _, err := tls.X509KeyPair(s.Data[builder.CertKey], s.Data[builder.PrivateKeyKey]); err != nil {
			return time.Time{}, fmt.Errorf("Secret %s: tls.crt and tls.key are not a certificate and its key: %w", n.Secret, err) //nolint:staticcheck // names a Kubernetes kind
		}
	}
	return expiry, nil
}

// parseCerts parses the PEM certificates of data; there must be one, and
// every one must parse.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	certs, err := certsOf(data)
	if err == nil && len(certs) == 0 {
		err = errors.New("no PEM certificate")
	}
	if err != nil {
		return nil, err
	}
	return certs, nil
}

// certsOf parses the CERTIFICATE blocks of data: those that parse, and
// the error of the first that does not.
func certsOf(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	var firstErr error
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, firstErr
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		certs = append(certs, c)
	}
}

// Condition is the CertificatesReady condition: False with reason and the
// problems when there are any, True with the nearest expiry otherwise.
func Condition(c *etcdv1alpha1.EtcdCluster, reason string, problems []string, expiry, now time.Time) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionCertificatesReady, ObservedGeneration: c.Generation}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, strings.Join(problems, "; ")
		return cond
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonCertificatesReady
	cond.Message = fmt.Sprintf("Every certificate is valid; the nearest expires at %s (in %s)",
		expiry.UTC().Format(time.RFC3339), expiry.Sub(now).Truncate(time.Hour))
	return cond
}
