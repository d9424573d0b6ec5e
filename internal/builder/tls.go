package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcdversion"
)

// Where member Pods find their certificates.
const (
	// TLSVolumeName is the projected volume holding a member's certificates.
	TLSVolumeName = "etcd-tls"
	// TLSDir is where the TLS volume is mounted.
	TLSDir = "/var/lib/etcd-tls"
)

// Keys of certificate Secrets: tls.crt and tls.key as in a
// kubernetes.io/tls Secret, ca.crt as cert-manager writes it.
const (
	CertKey       = corev1.TLSCertKey
	PrivateKeyKey = corev1.TLSPrivateKeyKey
	CAKey         = "ca.crt"
)

// Files of the TLS volume.
const (
	serverCertFile = "server.crt"
	serverKeyFile  = "server.key"
	clientCAFile   = "client-ca.crt"
	peerCertFile   = "peer.crt"
	peerKeyFile    = "peer.key"
	peerCAFile     = "peer-ca.crt"
)

// SecretKey is one key of one Secret in the cluster's namespace; the zero
// value means the piece is not used.
type SecretKey struct {
	Secret string
	Key    string
}

// IsSet tells whether the piece is used.
func (k SecretKey) IsSet() bool { return k.Secret != "" }

// TLSSources says where each piece of a cluster's TLS comes from.
type TLSSources struct {
	// ServerCert and ServerKey are the certificate members serve clients
	// with; ServerCA is the CA clients (the operator among them) verify it
	// with.
	ServerCert, ServerKey, ServerCA SecretKey
	// ClientCA is the CA members verify client certificates with; set, it
	// turns on client certificate auth.
	ClientCA SecretKey
	// ClientCert and ClientKey are the operator's own client certificate.
	ClientCert, ClientKey SecretKey
	// PeerCert, PeerKey and PeerCA are the certificate members present to
	// each other and the CA they verify each other with.
	PeerCert, PeerKey, PeerCA SecretKey
}

// ServerTLSSecretName is the Secret of the members' serving certificate
// in operator-managed mode.
func ServerTLSSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-server-tls" }

// PeerTLSSecretName is the Secret of the members' peer certificate in
// operator-managed mode.
func PeerTLSSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-peer-tls" }

// ClientTLSSecretName is the Secret of the operator's client certificate
// (CN root) in operator-managed mode.
func ClientTLSSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-client-tls" }

// RootPasswordSecretName is the Secret holding root's password (keys
// username and password) on a cluster with auth where the operator has no
// client certificate.
func RootPasswordSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-root-password" }

// TrustBundleSecretName is the Secret of the CAs a cluster's members and
// clients trust, which the PKI reconciler gathers from the certificate
// Secrets: every CA in use now and those replaced but not expired yet.
func TrustBundleSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-ca-bundle" }

// Keys of the trust bundle, one per kind of CA.
const (
	// BundleServerCAKey holds the CAs clients verify members' serving
	// certificates with.
	BundleServerCAKey = CAKey
	// BundleClientCAKey holds the CAs members verify client certificates
	// with.
	BundleClientCAKey = clientCAFile
	// BundlePeerCAKey holds the CAs members verify each other with.
	BundlePeerCAKey = peerCAFile
)

// TrustBundleHash hashes what members read of a trust bundle (the CAs
// they verify clients and peers with, not those clients verify members
// with): a member Pod started with another hash is rolled.
func TrustBundleHash(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range []string{BundleClientCAKey, BundlePeerCAKey} {
		_, _ = fmt.Fprintf(h, "%s=%x;", k, data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TLSSourcesOf says where members and the operator find each piece of a
// cluster's TLS: certificates and keys in the Secrets of
// CertificateSourcesOf, the CAs they trust in the trust bundle. A cluster
// without TLS gets the zero value.
func TLSSourcesOf(c *etcdv1alpha1.EtcdCluster) TLSSources {
	s := CertificateSourcesOf(c)
	bundle := TrustBundleSecretName(c)
	for _, ca := range []struct {
		k   *SecretKey
		key string
	}{{&s.ServerCA, BundleServerCAKey}, {&s.ClientCA, BundleClientCAKey}, {&s.PeerCA, BundlePeerCAKey}} {
		if ca.k.IsSet() {
			*ca.k = SecretKey{bundle, ca.key}
		}
	}
	return s
}

// CertificateSourcesOf says where the TLS pieces of a cluster are issued
// to: the operator's Secrets in managed mode (each holds ca.crt of the CA
// that signed it: server and client certificates share the client CA),
// the user's Secrets otherwise. A cluster without TLS gets the zero value.
func CertificateSourcesOf(c *etcdv1alpha1.EtcdCluster) TLSSources {
	sec := c.Spec.Security
	var s TLSSources
	switch {
	case sec.ManagedTLS():
		server, peer, cli := ServerTLSSecretName(c), PeerTLSSecretName(c), ClientTLSSecretName(c)
		s.ServerCert, s.ServerKey, s.ServerCA = SecretKey{server, CertKey}, SecretKey{server, PrivateKeyKey}, SecretKey{server, CAKey}
		s.ClientCA = SecretKey{cli, CAKey}
		s.ClientCert, s.ClientKey = SecretKey{cli, CertKey}, SecretKey{cli, PrivateKeyKey}
		s.PeerCert, s.PeerKey, s.PeerCA = SecretKey{peer, CertKey}, SecretKey{peer, PrivateKeyKey}, SecretKey{peer, CAKey}
	case sec != nil && sec.TLS != nil:
		t := sec.TLS
		if t.ServerSecret != "" {
			s.ServerCert, s.ServerKey, s.ServerCA = SecretKey{t.ServerSecret, CertKey}, SecretKey{t.ServerSecret, PrivateKeyKey}, SecretKey{t.ServerTrustedCASecret, CAKey}
		}
		if t.ClientTrustedCASecret != "" {
			s.ClientCA = SecretKey{t.ClientTrustedCASecret, CAKey}
		}
		if t.ClientSecret != "" {
			s.ClientCert, s.ClientKey = SecretKey{t.ClientSecret, CertKey}, SecretKey{t.ClientSecret, PrivateKeyKey}
		}
		if t.PeerSecret != "" {
			s.PeerCert, s.PeerKey, s.PeerCA = SecretKey{t.PeerSecret, CertKey}, SecretKey{t.PeerSecret, PrivateKeyKey}, SecretKey{t.PeerTrustedCASecret, CAKey}
		}
	}
	return s
}

// tlsFile is one file of a member's TLS volume and where it comes from.
type tlsFile struct {
	file string
	from SecretKey
}

// memberTLSFiles are the files of a member's TLS volume, in a fixed order.
func memberTLSFiles(s TLSSources) []tlsFile {
	all := []tlsFile{
		{serverCertFile, s.ServerCert}, {serverKeyFile, s.ServerKey}, {clientCAFile, s.ClientCA},
		{peerCertFile, s.PeerCert}, {peerKeyFile, s.PeerKey}, {peerCAFile, s.PeerCA},
	}
	return slices.DeleteFunc(all, func(f tlsFile) bool { return !f.from.IsSet() })
}

// tlsVolume is the projected volume of a member's certificates, one
// source per Secret; nil without TLS. Keys are readable by the owner and
// group only: a member running as non-root needs securityContext.fsGroup.
func tlsVolume(c *etcdv1alpha1.EtcdCluster) *corev1.Volume {
	files := memberTLSFiles(TLSSourcesOf(c))
	if len(files) == 0 {
		return nil
	}
	var sources []corev1.VolumeProjection
	index := map[string]int{}
	for _, f := range files {
		i, ok := index[f.from.Secret]
		if !ok {
			i = len(sources)
			index[f.from.Secret] = i
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: f.from.Secret},
			}})
		}
		sources[i].Secret.Items = append(sources[i].Secret.Items, corev1.KeyToPath{Key: f.from.Key, Path: f.file})
	}
	return &corev1.Volume{Name: TLSVolumeName, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr.To[int32](0o440)},
	}}
}

// tlsArgs are etcd's TLS flags of member for the files of the TLS volume.
func tlsArgs(c *etcdv1alpha1.EtcdCluster, member string) []string {
	s := TLSSourcesOf(c)
	file := func(name string) string { return TLSDir + "/" + name }
	var args []string
	if s.ServerCert.IsSet() {
		args = append(args, "--cert-file="+file(serverCertFile), "--key-file="+file(serverKeyFile))
	}
	if s.ClientCA.IsSet() {
		args = append(args, "--trusted-ca-file="+file(clientCAFile), "--client-cert-auth=true")
	}
	if s.PeerCert.IsSet() {
		args = append(args, "--peer-cert-file="+file(peerCertFile), "--peer-key-file="+file(peerKeyFile),
			"--peer-trusted-ca-file="+file(peerCAFile), "--peer-client-cert-auth=true",
			// Members connect from Pod IPs, which have no reverse DNS name to
			// match against the peer certificate's SANs, so that check is
			// off. A peer must instead present a certificate valid for this
			// member's own name, as every member's is (members dial each
			// other by name and verify the certificate against it): one
			// issued for another cluster, even by the same CA, is not.
			peerSkipSANFlag(EtcdImage(c))+"=true",
			"--peer-cert-allowed-hostname="+MemberHost(c, member))
	}
	return args
}

// peerSkipSANFlag is etcd's flag to skip the SAN check of peer client
// certificates: experimental before 3.6, renamed in 3.6 (the old name is
// gone in 3.7).
func peerSkipSANFlag(image string) string {
	if v, ok := etcdversion.OfImage(image); ok && v.Major == 3 && v.Minor == 5 {
		return "--experimental-peer-skip-client-san-verification"
	}
	return "--peer-skip-client-san-verification"
}

// scheme is the URL scheme of traffic that is encrypted when tls is set.
func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// operatorVolumes are the volumes the operator gives a member: its data
// and, with TLS, its certificates.
func operatorVolumes(c *etcdv1alpha1.EtcdCluster, member string) []corev1.Volume {
	vols := []corev1.Volume{dataVolume(c, member)}
	if v := tlsVolume(c); v != nil {
		vols = append(vols, *v)
	}
	return vols
}

// operatorMounts are the etcd container's mounts of operatorVolumes.
func operatorMounts(c *etcdv1alpha1.EtcdCluster) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{{Name: DataVolumeName, MountPath: DataDir}}
	if tlsVolume(c) != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: TLSVolumeName, MountPath: TLSDir, ReadOnly: true})
	}
	return mounts
}
