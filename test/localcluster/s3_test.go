package localcluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestS3Server: the local cluster's S3 server (hack/localcluster/s3.yaml),
// reached through support.Env.EnsureS3 as the e2e suite reaches it. From
// the host, over HTTPS trusting only the server's CA, a 20 MiB object with
// user metadata goes in in parts and comes back whole, and a wrong secret
// is refused; from a Pod, https://s3.s3-system.svc resolves and serves the
// same object to the keys of a credentials Secret.
func TestS3Server(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(ctx, t)
	env.DumpOnFailure(t, ns)
	bucket := ns // lc-xxxxx: a valid bucket name, one per test run
	const key = "etcd/snapshot.db"
	start := time.Now()
	s3, err := env.EnsureS3(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EnsureS3 took %s: %s (%s), in the cluster %s", time.Since(start).Round(time.Millisecond), s3.Endpoint, s3.ServerName, s3.InClusterEndpoint)
	c, err := s3.Client(s3.AccessKeyID, s3.SecretAccessKey)
	if err != nil {
		t.Fatal(err)
	}
	// The server outlives the test; its claim is memory.
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
			t.Logf("removing the object: %v", err)
		}
		if err := c.RemoveBucket(ctx, bucket); err != nil {
			t.Logf("removing the bucket: %v", err)
		}
	})

	data := make([]byte, 20<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	start = time.Now()
	if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		UserMetadata: map[string]string{"etcd-revision": "42", "sha256": want},
		PartSize:     16 << 20, // two parts, as a backup is stored
		NumThreads:   2,
	}); err != nil {
		t.Fatalf("putting a 20 MiB object: %v", err)
	}
	t.Logf("put 20 MiB in %s", time.Since(start).Round(time.Millisecond))

	info, err := c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.UserMetadata["Etcd-Revision"] != "42" || info.UserMetadata["Sha256"] != want {
		t.Errorf("stat: size %d, user metadata %v; want %d, Etcd-Revision 42 and Sha256 %s", info.Size, info.UserMetadata, len(data), want)
	}

	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, obj)
	_ = obj.Close()
	if err != nil || n != int64(len(data)) || hex.EncodeToString(h.Sum(nil)) != want {
		t.Errorf("get: %d bytes, sha256 %x, %v; want %d bytes, sha256 %s", n, h.Sum(nil), err, len(data), want)
	}

	wrong, err := s3.Client(s3.AccessKeyID, "not-the-secret")
	if err != nil {
		t.Fatal(err)
	}
	// A GET, whose error has a body: a HEAD's says only AccessDenied.
	_, err = wrong.ListBuckets(ctx)
	if code := minio.ToErrorResponse(err).Code; code != "SignatureDoesNotMatch" {
		t.Errorf("a wrong secret: error %v (code %q), want SignatureDoesNotMatch", err, code)
	}

	// Without the server's CA (the system's roots only) TLS fails.
	u, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	untrusting, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKeyID, s3.SecretAccessKey, ""), Secure: true, Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.BucketExists(ctx, bucket); err == nil || !strings.Contains(err.Error(), "x509") {
		t.Errorf("a client without the server's CA: %v, want an x509 error", err)
	}

	// From a Pod: the cluster's name of the Service, the CA and keys from
	// Secrets of the test's namespace, as a backup Pod gets them.
	if err := s3.CreateCASecret(ctx, ns, "s3-ca"); err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateCredentialsSecret(ctx, ns, "s3-credentials"); err != nil {
		t.Fatal(err)
	}
	clusterIP := u.Hostname()
	pod := busybox("s3-client", fmt.Sprintf(`set -e
endpoint=%s
curl() { command curl -sS --max-time 20 --cacert /s3-ca/ca.crt "$@"; }
echo "resolved: $(getent hosts s3.s3-system.svc)"
echo "health: $(curl $endpoint/_/health)"
echo "anonymous: $(curl -o /dev/null -w '%%{http_code}' $endpoint/%s/%s)"
sum=$(curl -f --aws-sigv4 aws:amz:%s:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' $endpoint/%s/%s | sha256sum)
echo "signed get: ${sum%%%% *}"`, s3.InClusterEndpoint, bucket, key, s3.Region, bucket, key))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	c0 := &pod.Spec.Containers[0]
	c0.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s3-credentials"}}}}
	c0.VolumeMounts = []corev1.VolumeMount{{Name: "s3-ca", MountPath: "/s3-ca", ReadOnly: true}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "s3-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3-ca"}}}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	eventually(t, 2*time.Minute, "pod s3-client to finish", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "s3-client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if phase = p.Status.Phase; phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("phase %s %s", phase, describeContainers(p))
		}
		return nil
	})
	out := containerLog(t, ns, "s3-client", "main")
	for _, line := range []string{
		"resolved: " + clusterIP + " ",
		"health: OK",
		"anonymous: 403",
		"signed get: " + want,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the pod's output has no %q:\n%s", line, out)
		}
	}
	if phase != corev1.PodSucceeded {
		t.Errorf("pod s3-client ended %s:\n%s", phase, out)
	}
}
