package localcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestCertManagerIssuesCertificates installs cert-manager as the demo does
// and has it issue a CA and a leaf certificate into Secrets.
func TestCertManagerIssuesCertificates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := env.InstallCertManager(); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(ctx, t)
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	issuers := dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}).Namespace(ns)
	certs := dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}).Namespace(ns)
	objects := []struct {
		res  dynamic.ResourceInterface
		kind string
		obj  map[string]any
	}{
		{issuers, "Issuer", map[string]any{"metadata": map[string]any{"name": "selfsigned"}, "spec": map[string]any{"selfSigned": map[string]any{}}}},
		{certs, "Certificate", map[string]any{"metadata": map[string]any{"name": "ca"}, "spec": map[string]any{
			"isCA": true, "commonName": "test-ca", "secretName": "ca",
			"issuerRef": map[string]any{"name": "selfsigned", "kind": "Issuer"},
		}}},
		{issuers, "Issuer", map[string]any{"metadata": map[string]any{"name": "ca"}, "spec": map[string]any{"ca": map[string]any{"secretName": "ca"}}}},
		{certs, "Certificate", map[string]any{"metadata": map[string]any{"name": "server"}, "spec": map[string]any{
			"secretName": "server", "dnsNames": []any{"server.example"},
			"issuerRef": map[string]any{"name": "ca", "kind": "Issuer"},
		}}},
	}
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetAPIVersion("cert-manager.io/v1")
		u.SetKind(o.kind)
		if _, err := o.res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the server certificate's Secret", func() error {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, "server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if len(s.Data[k]) == 0 {
				return fmt.Errorf("secret server has no %s", k)
			}
		}
		return nil
	})
}
