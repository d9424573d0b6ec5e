package builder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func withTLS(name string, tls *etcdv1alpha1.TLSSpec) *etcdv1alpha1.EtcdCluster {
	c := newCluster(name).obj()
	c.Spec.Security = &etcdv1alpha1.SecuritySpec{TLS: tls}
	return c
}

func TestTLSArgsAndURLs(t *testing.T) {
	t.Parallel()
	member := Member{Name: "a-0", ClusterState: ClusterStateNew, InitialCluster: "a-0=x"}
	userAll := &etcdv1alpha1.TLSSpec{
		PeerSecret: "peer", PeerTrustedCASecret: "peer-ca", ServerSecret: "server", ServerTrustedCASecret: "server-ca",
		ClientSecret: "client", ClientTrustedCASecret: "client-ca",
	}
	tests := []struct {
		name               string
		cluster            *etcdv1alpha1.EtcdCluster
		peerURL, clientURL string
		want, absent       []string
		volumeSecrets      []string
	}{
		{
			name: "no security: plain HTTP as the seed documents", cluster: newCluster("a").obj(),
			peerURL: "http://a-0.a-headless.ns.svc:2380", clientURL: "http://a-0.a-headless.ns.svc:2379",
			want:   []string{"--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=http://0.0.0.0:2379", "--listen-metrics-urls=http://0.0.0.0:2381"},
			absent: []string{"--cert-file", "--peer-cert-file", "--client-cert-auth", "--trusted-ca-file"},
		},
		{
			name: "operator-managed: peer and client TLS, client certificates required", cluster: withTLS("a", &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}}),
			peerURL: "https://a-0.a-headless.ns.svc:2380", clientURL: "https://a-0.a-headless.ns.svc:2379",
			want: []string{
				"--listen-peer-urls=https://0.0.0.0:2380", "--listen-client-urls=https://0.0.0.0:2379", "--listen-metrics-urls=http://0.0.0.0:2381",
				"--initial-advertise-peer-urls=https://a-0.a-headless.ns.svc:2380", "--advertise-client-urls=https://a-0.a-headless.ns.svc:2379",
				"--cert-file=/var/lib/etcd-tls/server.crt", "--key-file=/var/lib/etcd-tls/server.key",
				"--trusted-ca-file=/var/lib/etcd-tls/client-ca.crt", "--client-cert-auth=true",
				"--peer-cert-file=/var/lib/etcd-tls/peer.crt", "--peer-key-file=/var/lib/etcd-tls/peer.key",
				"--peer-trusted-ca-file=/var/lib/etcd-tls/peer-ca.crt", "--peer-client-cert-auth=true",
				"--peer-skip-client-san-verification=true", "--peer-cert-allowed-hostname=a-0.a-headless.ns.svc",
			},
			volumeSecrets: []string{"a-server-tls", "a-ca-bundle", "a-peer-tls"},
		},
		{
			name: "user Secrets, all of them", cluster: withTLS("a", userAll),
			peerURL: "https://a-0.a-headless.ns.svc:2380", clientURL: "https://a-0.a-headless.ns.svc:2379",
			want:          []string{"--client-cert-auth=true", "--peer-client-cert-auth=true", "--trusted-ca-file=/var/lib/etcd-tls/client-ca.crt", "--peer-cert-allowed-hostname=a-0.a-headless.ns.svc"},
			volumeSecrets: []string{"server", "a-ca-bundle", "peer"},
		},
		{
			name: "user Secrets, peers only: clients stay plain", cluster: withTLS("a", &etcdv1alpha1.TLSSpec{PeerSecret: "peer", PeerTrustedCASecret: "peer-ca"}),
			peerURL: "https://a-0.a-headless.ns.svc:2380", clientURL: "http://a-0.a-headless.ns.svc:2379",
			want:          []string{"--listen-client-urls=http://0.0.0.0:2379", "--peer-cert-file=/var/lib/etcd-tls/peer.crt"},
			absent:        []string{"--cert-file", "--client-cert-auth"},
			volumeSecrets: []string{"peer", "a-ca-bundle"},
		},
		{
			name: "user Secrets, server without client auth", cluster: withTLS("a", &etcdv1alpha1.TLSSpec{ServerSecret: "server", ServerTrustedCASecret: "server-ca"}),
			peerURL: "http://a-0.a-headless.ns.svc:2380", clientURL: "https://a-0.a-headless.ns.svc:2379",
			want:          []string{"--cert-file=/var/lib/etcd-tls/server.crt"},
			absent:        []string{"--client-cert-auth", "--trusted-ca-file", "--peer-"},
			volumeSecrets: []string{"server"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkEqual(t, PeerURL(tt.cluster, "a-0"), tt.peerURL)
			checkEqual(t, ClientURL(tt.cluster, "a-0"), tt.clientURL)
			pod := MemberPod(tt.cluster, member)
			args := pod.Spec.Containers[0].Args
			for _, w := range tt.want {
				if !slices.Contains(args, w) {
					t.Errorf("args lack %s: %v", w, args)
				}
			}
			for _, a := range tt.absent {
				if slices.ContainsFunc(args, func(arg string) bool { return strings.HasPrefix(arg, a) }) {
					t.Errorf("args have %s: %v", a, args)
				}
			}
			var got []string
			var mounted bool
			for _, v := range pod.Spec.Volumes {
				if v.Name == TLSVolumeName {
					for _, s := range v.Projected.Sources {
						got = append(got, s.Secret.Name)
					}
				}
			}
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				mounted = mounted || m.Name == TLSVolumeName && m.MountPath == TLSDir && m.ReadOnly
			}
			checkEqual(t, got, tt.volumeSecrets)
			checkEqual(t, mounted, len(tt.volumeSecrets) > 0)
			// The probes stay on the plain-HTTP metrics port.
			checkEqual(t, pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Port.StrVal, MetricsPortName)
			checkEqual(t, pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme, corev1.URIScheme(""))
		})
	}
}

func TestTLSVolumeItems(t *testing.T) {
	t.Parallel()
	c := withTLS("a", &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}})
	v := tlsVolume(c)
	checkEqual(t, *v.Projected.DefaultMode, int32(0o440))
	items := map[string]string{}
	for _, s := range v.Projected.Sources {
		for _, it := range s.Secret.Items {
			items[it.Path] = s.Secret.Name + "/" + it.Key
		}
	}
	checkEqual(t, items, map[string]string{
		"server.crt": "a-server-tls/tls.crt", "server.key": "a-server-tls/tls.key", "client-ca.crt": "a-ca-bundle/client-ca.crt",
		"peer.crt": "a-peer-tls/tls.crt", "peer.key": "a-peer-tls/tls.key", "peer-ca.crt": "a-ca-bundle/peer-ca.crt",
	})
}

// Members and clients trust the CAs of the bundle; the certificates stay
// where they are issued.
func TestTLSSourcesTrustTheBundle(t *testing.T) {
	t.Parallel()
	c := withTLS("a", &etcdv1alpha1.TLSSpec{ServerSecret: "server", ServerTrustedCASecret: "server-ca", PeerSecret: "peer", PeerTrustedCASecret: "peer-ca"})
	issued, used := CertificateSourcesOf(c), TLSSourcesOf(c)
	checkEqual(t, issued.ServerCA, SecretKey{"server-ca", CAKey})
	checkEqual(t, used.ServerCA, SecretKey{"a-ca-bundle", BundleServerCAKey})
	checkEqual(t, used.PeerCA, SecretKey{"a-ca-bundle", BundlePeerCAKey})
	checkEqual(t, used.ClientCA.IsSet(), false) // no client CA: no client certificate auth
	checkEqual(t, used.ServerCert, issued.ServerCert)
}

func TestTrustBundleHashAndPod(t *testing.T) {
	t.Parallel()
	a := TrustBundleHash(map[string][]byte{"client-ca.crt": []byte("A"), "peer-ca.crt": []byte("B")})
	checkEqual(t, a, TrustBundleHash(map[string][]byte{"peer-ca.crt": []byte("B"), "client-ca.crt": []byte("A")}))
	if a == TrustBundleHash(map[string][]byte{"client-ca.crt": []byte("A"), "peer-ca.crt": []byte("C")}) ||
		a == TrustBundleHash(map[string][]byte{"client-ca.crt": []byte("AB")}) {
		t.Error("different bundles hash alike")
	}
	// What only clients read does not restart members.
	checkEqual(t, a, TrustBundleHash(map[string][]byte{"client-ca.crt": []byte("A"), "peer-ca.crt": []byte("B"), "ca.crt": []byte("S")}))
	c := withTLS("a", &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}})
	pod := MemberPod(c, Member{Name: "a-0", TrustBundleHash: a})
	checkEqual(t, pod.Annotations[etcdv1alpha1.AnnotationTrustBundleHash], a)
	// The spec hash does not depend on the bundle: a bundle change rolls
	// members on its own account.
	checkEqual(t, pod.Annotations[etcdv1alpha1.AnnotationPodSpecHash], PodSpecHash(c))
	_, has := MemberPod(newCluster("a").obj(), Member{Name: "a-0"}).Annotations[etcdv1alpha1.AnnotationTrustBundleHash]
	checkEqual(t, has, false)
}

func TestPeerSkipSANFlag(t *testing.T) {
	t.Parallel()
	for image, want := range map[string]string{
		"quay.io/coreos/etcd:v3.5.12":        "--experimental-peer-skip-client-san-verification",
		"registry.k8s.io/etcd:3.5.21-0":      "--experimental-peer-skip-client-san-verification",
		"quay.io/coreos/etcd:v3.6.16":        "--peer-skip-client-san-verification",
		"localhost:5000/etcd":                "--peer-skip-client-san-verification",
		"quay.io/coreos/etcd@sha256:abcdef0": "--peer-skip-client-san-verification",
	} {
		checkEqual(t, peerSkipSANFlag(image), want)
	}
}
