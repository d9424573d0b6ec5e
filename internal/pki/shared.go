package pki

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// With user-provided Secrets the operator issues nothing, so it cannot
// give a cluster a CA of its own. Peers are kept apart by name (a peer's
// certificate must be valid for the member's own name:
// builder.tlsArgs), but a client certificate names only a user: with one
// client CA trusted by two clusters, a certificate with CN root made for
// one is root on the other. The operator refuses to start a cluster whose
// client CA another cluster it sees already trusts; it cannot see CAs
// trusted elsewhere, nor what else a user's CA signs.

// OtherCluster is what the PKI reconciler knows of another EtcdCluster:
// its name, when it was created and the CAs its members trust for client
// certificates (client-ca.crt of its trust bundle).
type OtherCluster struct {
	Namespace, Name string
	Created         time.Time
	ClientCAs       []byte
}

// older tells whether o came before cluster c: created earlier, or in
// the same second and first by namespace and name.
func (o OtherCluster) older(c *etcdv1alpha1.EtcdCluster) bool {
	if !o.Created.Equal(c.CreationTimestamp.Time) {
		return o.Created.Before(c.CreationTimestamp.Time)
	}
	return o.Namespace+"/"+o.Name < c.Namespace+"/"+c.Name
}

// SharedClientCA says which client CA of a cluster with user-provided
// Secrets (clientCAs, client-ca.crt of its trust bundle) another cluster
// already trusts, and which; "" when none. A CA is the same when its key
// is: a CA reissued with the same key signs the same certificates. Of two
// clusters that share a CA, the older one is not refused: the newer one
// came to share it. Operator-managed clusters never share their CAs
// (pki.go), so they are always the older.
func SharedClientCA(c *etcdv1alpha1.EtcdCluster, clientCAs []byte, others []OtherCluster) string {
	if c.Spec.Security.ManagedTLS() || c.Spec.Security.TLS == nil || c.Spec.Security.TLS.ClientTrustedCASecret == "" {
		return ""
	}
	mine := parseValid(clientCAs)
	var shared []string
	for _, o := range others {
		if o.Namespace == c.Namespace && o.Name == c.Name {
			continue
		}
		for _, theirs := range parseValid(o.ClientCAs) {
			if i := slices.IndexFunc(mine, func(m *x509.Certificate) bool {
				return bytes.Equal(m.RawSubjectPublicKeyInfo, theirs.RawSubjectPublicKeyInfo)
			}); i >= 0 && o.older(c) {
				shared = append(shared, fmt.Sprintf("EtcdCluster %s/%s trusts the client CA %q too", o.Namespace, o.Name, mine[i].Subject.CommonName))
				break
			}
		}
	}
	if len(shared) == 0 {
		return ""
	}
	slices.Sort(shared)
	return fmt.Sprintf("spec.security.tls.clientTrustedCASecret: Secret %s holds a CA another cluster trusts for its clients (%s): a client certificate issued for one cluster would authenticate on the other, and one with CN %s would be root on both. "+
		"Give each cluster a client CA of its own (a new CA in Secret %s, with clientSecret issued by it), or use certManager, which makes one per cluster", c.Spec.Security.TLS.ClientTrustedCASecret, strings.Join(shared, "; "), RootCommonName, c.Spec.Security.TLS.ClientTrustedCASecret)
}
