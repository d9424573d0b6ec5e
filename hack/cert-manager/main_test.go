package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
)

// binEnv names an already built controller binary to test instead of
// running the controllers in this process.
const binEnv = "CERT_MANAGER_CONTROLLER_BIN"

// TestIssueCertificates starts kube-apiserver and etcd with envtest, installs
// cert-manager's CRDs from the module, runs the controllers against them and
// issues a CA and a leaf certificate:
//
//	SelfSigned Issuer -> CA Certificate -> CA Issuer -> leaf Certificate
//
// KUBEBUILDER_ASSETS must name a directory with kube-apiserver and etcd.
// With CERT_MANAGER_CONTROLLER_BIN set, that binary is started instead of
// running the controllers in this process.
func TestIssueCertificates(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run it with `make test`, which builds kube-apiserver and etcd into bin/")
	}

	crdDir := filepath.Join(moduleDir(t, "github.com/cert-manager/cert-manager"), "deploy", "crds")
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	if n := len(env.CRDs); n != 6 {
		t.Fatalf("installed %d CRDs from %s, want 6", n, crdDir)
	}

	user, err := env.AddUser(envtest.User{Name: "cert-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding envtest user: %v", err)
	}
	kubeconfigBytes, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("rendering kubeconfig: %v", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kubeconfigBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	kube, err := kubernetes.NewForConfig(user.Config())
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cmclient.NewForConfig(user.Config())
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	startController(t, ctx, kubeconfig)

	const ns = "cm-test"
	create(t, func() error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})

	issuer := func(name string, spec cmapi.IssuerConfig) {
		t.Helper()
		create(t, func() error {
			_, err := cm.CertmanagerV1().Issuers(ns).Create(ctx, &cmapi.Issuer{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       cmapi.IssuerSpec{IssuerConfig: spec},
			}, metav1.CreateOptions{})
			return err
		})
	}
	certificate := func(name string, spec cmapi.CertificateSpec) {
		t.Helper()
		create(t, func() error {
			_, err := cm.CertmanagerV1().Certificates(ns).Create(ctx, &cmapi.Certificate{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       spec,
			}, metav1.CreateOptions{})
			return err
		})
	}

	issuer("selfsigned", cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}})
	certificate("test-ca", cmapi.CertificateSpec{
		IsCA:       true,
		CommonName: "test-ca",
		SecretName: "test-ca",
		IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: cmapi.IssuerKind},
	})
	issuer("ca", cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "test-ca"}})
	certificate("leaf", cmapi.CertificateSpec{
		CommonName: "leaf.cm-test.svc",
		DNSNames:   []string{"leaf.cm-test.svc", "leaf.cm-test.svc.cluster.local"},
		SecretName: "leaf-tls",
		IssuerRef:  cmmeta.IssuerReference{Name: "ca", Kind: cmapi.IssuerKind},
	})

	waitFor(t, ctx, "Issuer selfsigned Ready", func() (bool, string, error) {
		is, err := cm.CertmanagerV1().Issuers(ns).Get(ctx, "selfsigned", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return ready(is.Status.Conditions)
	})
	waitFor(t, ctx, "Certificate test-ca Ready", func() (bool, string, error) {
		c, err := cm.CertmanagerV1().Certificates(ns).Get(ctx, "test-ca", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return certReady(c)
	})
	waitFor(t, ctx, "Issuer ca Ready", func() (bool, string, error) {
		is, err := cm.CertmanagerV1().Issuers(ns).Get(ctx, "ca", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return ready(is.Status.Conditions)
	})
	waitFor(t, ctx, "Certificate leaf Ready", func() (bool, string, error) {
		c, err := cm.CertmanagerV1().Certificates(ns).Get(ctx, "leaf", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return certReady(c)
	})

	caSecret, err := kube.CoreV1().Secrets(ns).Get(ctx, "test-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leafSecret, err := kube.CoreV1().Secrets(ns).Get(ctx, "leaf-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, cmmeta.TLSCAKey} {
		if len(leafSecret.Data[key]) == 0 {
			t.Errorf("Secret leaf-tls has no %s (keys: %v)", key, keys(leafSecret.Data))
		}
	}
	if !bytes.Equal(leafSecret.Data[cmmeta.TLSCAKey], caSecret.Data[corev1.TLSCertKey]) {
		t.Errorf("Secret leaf-tls ca.crt is not the CA's tls.crt")
	}
}

// startController runs the controllers until the test ends, in this process
// or, with CERT_MANAGER_CONTROLLER_BIN set, as that binary.
func startController(t *testing.T, ctx context.Context, kubeconfig string) {
	t.Helper()
	args := []string{"--kubeconfig", kubeconfig, "--namespace", "cert-manager"}

	if bin := os.Getenv(binEnv); bin != "" {
		cmd := exec.Command(bin, args...)
		logPath := filepath.Join(t.TempDir(), "controller.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			var err error
			select {
			case err = <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				err = fmt.Errorf("did not stop within 30s of SIGINT: %v", <-exited)
			}
			logFile.Close()
			if err != nil {
				t.Errorf("controller binary: %v", err)
			}
			if err != nil || t.Failed() {
				out, _ := os.ReadFile(logPath)
				t.Logf("controller log:\n%s", out)
			}
		})
		return
	}

	opts, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, opts) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controllers: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("controllers did not stop within 30s")
		}
	})
}

// moduleDir returns the directory of a module in the build list.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatalf("module %s is not downloaded; run go mod download", module)
	}
	return dir
}

func create(t *testing.T, fn func() error) {
	t.Helper()
	if err := fn(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitFor polls check until it reports done or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, check func() (bool, string, error)) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "not checked yet"
	for {
		ok, detail, err := check()
		switch {
		case err != nil:
			last = err.Error()
		case ok:
			t.Logf("%s after %s", what, time.Since(start).Round(10*time.Millisecond))
			return
		default:
			last = detail
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; last state: %s", what, last)
		case <-tick.C:
		}
	}
}

func ready(conds []cmapi.IssuerCondition) (bool, string, error) {
	for _, c := range conds {
		if c.Type == cmapi.IssuerConditionReady {
			return c.Status == cmmeta.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message), nil
		}
	}
	return false, "no Ready condition", nil
}

func certReady(c *cmapi.Certificate) (bool, string, error) {
	for _, cond := range c.Status.Conditions {
		if cond.Type == cmapi.CertificateConditionReady {
			return cond.Status == cmmeta.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message), nil
		}
	}
	return false, "no Ready condition", nil
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
