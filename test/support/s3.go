package support

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Where hack/localcluster/s3.yaml puts the S3 server.
const (
	S3Namespace = "s3-system"
	// S3ServerName is the name of the Service s3 in the cluster, which the
	// server's certificate is for.
	S3ServerName = "s3.s3-system.svc"
	// S3InClusterEndpoint is the server's URL for Pods.
	S3InClusterEndpoint = "https://" + S3ServerName
	// S3Region is the server's region (versitygw's default).
	S3Region = "us-east-1"

	s3Service     = "s3"
	s3RootSecret  = "s3-root"
	s3TLSSecret   = "s3-tls"
	s3ReadyWithin = 2 * time.Minute
)

// S3 is the local cluster's S3 server (versitygw, POSIX backend, HTTPS) as
// a test reaches it.
type S3 struct {
	// Endpoint is the server's URL for a process on this host, such as a
	// test: https://<ClusterIP>:443. The local cluster's Service proxy
	// listens on each ClusterIP on the host, while cluster names are not in
	// the host's DNS; a client verifies the certificate as ServerName
	// (TLSConfig and Client do).
	Endpoint string
	// InClusterEndpoint is the server's URL for Pods (S3InClusterEndpoint):
	// the cluster DNS resolves it to the Service's ClusterIP.
	InClusterEndpoint string
	// ServerName is the name in the server's certificate (S3ServerName).
	ServerName string
	// CAPEM is the CA that signed the server's certificate: ca.crt of the
	// certificate's Secret s3-system/s3-tls.
	CAPEM []byte
	// AccessKeyID and SecretAccessKey are the root user's keys, from the
	// Secret s3-system/s3-root.
	AccessKeyID, SecretAccessKey string
	// Region is the server's region (S3Region).
	Region string

	client kubernetes.Interface
}

// s3Installed holds the state directories of the clusters this process has
// installed the S3 server in; s3Mu serialises EnsureS3.
var (
	s3Mu        sync.Mutex
	s3Installed = map[string]bool{}
)

// EnsureS3 makes sure the local cluster runs the S3 server and returns how
// to reach it. The first call in a process runs
// hack/localcluster/install-s3.sh, as `make localcluster-s3` does: it
// installs cert-manager, applies hack/localcluster/s3.yaml (server-side,
// so applying it again changes nothing) and waits until the server is
// ready. Every call then waits until the server answers a signed request
// from this host over HTTPS, trusting only its CA, and creates bucket
// unless it is empty or exists.
func (e *Env) EnsureS3(ctx context.Context, bucket string) (*S3, error) {
	s3Mu.Lock()
	defer s3Mu.Unlock()
	if !s3Installed[e.StateDir] {
		install := exec.CommandContext(ctx, filepath.Join(e.Root, "hack", "localcluster", "install-s3.sh"), e.Bin("kubectl-v1.37.2"))
		install.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig())
		if out, err := install.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("installing the S3 server (hack/localcluster/install-s3.sh): %w\n%s", err, out)
		}
		s3Installed[e.StateDir] = true
	}
	s, err := readS3(ctx, e.Client)
	if err != nil {
		return nil, err
	}
	c, err := s.Client(s.AccessKeyID, s.SecretAccessKey)
	if err != nil {
		return nil, err
	}
	if err := pollUntil(ctx, s3ReadyWithin, func(ctx context.Context) error {
		_, err := c.ListBuckets(ctx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("waiting for the S3 server at %s (%s) to answer: %w", s.Endpoint, s.ServerName, err)
	}
	if bucket == "" {
		return s, nil
	}
	exists, err := c.BucketExists(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("looking for bucket %s: %w", bucket, err)
	}
	if !exists {
		if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
			return nil, fmt.Errorf("creating bucket %s: %w", bucket, err)
		}
	}
	return s, nil
}

// readS3 reads the server's address, CA and root keys from the cluster.
func readS3(ctx context.Context, c kubernetes.Interface) (*S3, error) {
	svc, err := c.CoreV1().Services(S3Namespace).Get(ctx, s3Service, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ClusterIP and port", S3Namespace, s3Service)
	}
	port := svc.Spec.Ports[0].Port
	root, err := c.CoreV1().Secrets(S3Namespace).Get(ctx, s3RootSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	tlsSecret, err := c.CoreV1().Secrets(S3Namespace).Get(ctx, s3TLSSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s := &S3{
		Endpoint:          "https://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(port)),
		InClusterEndpoint: S3InClusterEndpoint,
		ServerName:        S3ServerName,
		CAPEM:             tlsSecret.Data["ca.crt"],
		AccessKeyID:       string(root.Data["ROOT_ACCESS_KEY_ID"]),
		SecretAccessKey:   string(root.Data["ROOT_SECRET_ACCESS_KEY"]),
		Region:            S3Region,
		client:            c,
	}
	switch {
	case len(s.CAPEM) == 0:
		return nil, fmt.Errorf("secret %s/%s has no ca.crt", S3Namespace, s3TLSSecret)
	case s.AccessKeyID == "" || s.SecretAccessKey == "":
		return nil, fmt.Errorf("secret %s/%s lacks ROOT_ACCESS_KEY_ID or ROOT_SECRET_ACCESS_KEY", S3Namespace, s3RootSecret)
	}
	return s, nil
}

// TLSConfig trusts only the server's CA and verifies its certificate as
// ServerName, whatever address the client dials.
func (s *S3) TLSConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CAPEM) {
		return nil, errors.New("the S3 server's CA has no PEM certificate")
	}
	return &tls.Config{RootCAs: pool, ServerName: s.ServerName, MinVersion: tls.VersionTLS12}, nil
}

// Client is a minio-go client of the server from this host (Endpoint, path
// style, TLSConfig) with the given keys.
func (s *S3) Client(accessKeyID, secretAccessKey string) (*minio.Client, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := s.TLSConfig()
	if err != nil {
		return nil, err
	}
	transport, err := minio.DefaultTransport(true)
	if err != nil {
		return nil, err
	}
	transport.Proxy = nil
	transport.TLSClientConfig = tlsConfig
	return minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(accessKeyID, secretAccessKey, ""),
		Secure:       true,
		Transport:    transport,
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// HTTPClient is a plain HTTPS client of the server from this host, for
// requests that minio-go does not make (the health path, say).
func (s *S3) HTTPClient() (*http.Client, error) {
	tlsConfig, err := s.TLSConfig()
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}, nil
}

// CreateCredentialsSecret creates in ns the Secret name holding the root
// user's keys as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the keys an
// EtcdBackup's credentialsSecret has.
func (s *S3) CreateCredentialsSecret(ctx context.Context, ns, name string) error {
	return CreateS3CredentialsSecret(ctx, s.client, ns, name, s.AccessKeyID, s.SecretAccessKey)
}

// CreateCASecret creates in ns the Secret name holding the server's CA as
// ca.crt, the default key of an EtcdBackup's caSecret.
func (s *S3) CreateCASecret(ctx context.Context, ns, name string) error {
	return createSecret(ctx, s.client, ns, name, map[string][]byte{"ca.crt": s.CAPEM})
}

// CreateS3CredentialsSecret creates in ns the Secret name with the keys
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: any keys, such as wrong
// ones for a test of refused credentials.
func CreateS3CredentialsSecret(ctx context.Context, c kubernetes.Interface, ns, name, accessKeyID, secretAccessKey string) error {
	return createSecret(ctx, c, ns, name, map[string][]byte{
		"AWS_ACCESS_KEY_ID":     []byte(accessKeyID),
		"AWS_SECRET_ACCESS_KEY": []byte(secretAccessKey),
	})
}

func createSecret(ctx context.Context, c kubernetes.Interface, ns, name string, data map[string][]byte) error {
	_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, metav1.CreateOptions{})
	return err
}

// pollUntil calls check every half second until it returns nil, and
// returns its last error once timeout has passed or ctx has ended; check's
// context ends then too.
func pollUntil(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %s)", err, timeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
