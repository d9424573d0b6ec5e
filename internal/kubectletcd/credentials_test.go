package kubectletcd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func tenant(name string, ready metav1.ConditionStatus, reason, message string) *etcdv1alpha1.EtcdTenant {
	t := &etcdv1alpha1.EtcdTenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       etcdv1alpha1.EtcdTenantSpec{ClusterName: "shared"},
	}
	t.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionReady, Status: ready, Reason: reason, Message: message, LastTransitionTime: ago(time.Hour)}}
	if ready == metav1.ConditionTrue {
		t.Status.SecretName = t.ConnectionSecretName()
		t.Status.Prefix = t.EffectivePrefix()
		t.Status.User = t.UserName()
	}
	return t
}

func readyTenant(name string) *etcdv1alpha1.EtcdTenant {
	return tenant(name, metav1.ConditionTrue, etcdv1alpha1.ReasonTenantReady, "ready")
}

func connectionSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func readyCluster() *etcdv1alpha1.EtcdCluster {
	return newCluster("shared").formed("3.6.5").condition(etcdv1alpha1.ConditionReady, metav1.ConditionTrue, etcdv1alpha1.ReasonAllMembersReady, "3 of 3 members are ready voters", time.Hour).obj()
}

var tlsData = map[string]string{
	"endpoints": "https://shared.prod.svc:2379", "prefix": "/tenant-a/",
	"ca.crt": "CA PEM", "tls.crt": "CERT PEM", "tls.key": "KEY PEM",
}

var passwordData = map[string]string{
	"endpoints": "http://shared.prod.svc:2379", "prefix": "/tenant-b/",
	"username": "tenant-tenant-b", "password": "s3cr3t",
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		secret     map[string]string
		args       []string
		wantOut    string
		wantErrOut string
		wantFiles  map[string]string
	}{
		{
			name: "TLS, command line", secret: tlsData, args: []string{"--dir", "DIR"},
			wantOut:    "etcdctl --endpoints=https://shared.prod.svc:2379 --cacert=DIR/ca.crt --cert=DIR/tls.crt --key=DIR/tls.key\n",
			wantErrOut: "# etcdtenant tenant-a may read and write keys under /tenant-a/ only\n",
			wantFiles:  map[string]string{"ca.crt": "CA PEM", "tls.crt": "CERT PEM", "tls.key": "KEY PEM"},
		},
		{
			name: "TLS, env file", secret: tlsData, args: []string{"--dir", "DIR", "--env"},
			wantOut: "# etcdctl settings of EtcdTenant tenant-a; it may read and write keys under /tenant-a/ only\n" +
				"ETCDCTL_ENDPOINTS=https://shared.prod.svc:2379\nETCDCTL_CACERT=DIR/ca.crt\nETCDCTL_CERT=DIR/tls.crt\nETCDCTL_KEY=DIR/tls.key\n",
			wantFiles: map[string]string{"ca.crt": "CA PEM", "tls.crt": "CERT PEM", "tls.key": "KEY PEM"},
		},
		{
			name: "password, command line", secret: passwordData,
			wantOut:    "etcdctl --endpoints=http://shared.prod.svc:2379 --user=tenant-tenant-b --password=s3cr3t\n",
			wantErrOut: "# etcdtenant tenant-a may read and write keys under /tenant-b/ only\n",
		},
		{
			name: "password, env file", secret: passwordData, args: []string{"--env"},
			wantOut: "# etcdctl settings of EtcdTenant tenant-a; it may read and write keys under /tenant-b/ only\n" +
				"ETCDCTL_ENDPOINTS=http://shared.prod.svc:2379\nETCDCTL_USER=tenant-tenant-b\nETCDCTL_PASSWORD=s3cr3t\n",
		},
		{
			name: "a password the shell must not read", args: []string{"--env"},
			secret: map[string]string{"endpoints": "http://shared.prod.svc:2379", "username": "tenant-tenant-b", "password": `it's $HOME`},
			wantOut: "# etcdctl settings of EtcdTenant tenant-a\n" +
				"ETCDCTL_ENDPOINTS=http://shared.prod.svc:2379\nETCDCTL_USER=tenant-tenant-b\nETCDCTL_PASSWORD='it'\\''s $HOME'\n",
		},
		{
			name: "server TLS and a password", args: []string{"--dir", "DIR"},
			secret:     map[string]string{"endpoints": "https://shared.prod.svc:2379", "prefix": "/p/", "ca.crt": "CA PEM", "username": "tenant-tenant-a", "password": "pw"},
			wantOut:    "etcdctl --endpoints=https://shared.prod.svc:2379 --cacert=DIR/ca.crt --user=tenant-tenant-a --password=pw\n",
			wantErrOut: "# etcdtenant tenant-a may read and write keys under /p/ only\n",
			wantFiles:  map[string]string{"ca.crt": "CA PEM"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			args := append([]string{"credentials", "tenant-a"}, tc.args...)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "DIR", d)
			}
			objs := []client.Object{readyTenant("tenant-a"), connectionSecret("tenant-a-etcd", tc.secret), readyCluster()}
			r := runCommand(t, objs, nil, 0, args...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if want := strings.ReplaceAll(tc.wantOut, "DIR", d); r.out != want {
				t.Errorf("printed\n%s\nwant\n%s", r.out, want)
			}
			if r.errOut != tc.wantErrOut {
				t.Errorf("stderr %q, want %q", r.errOut, tc.wantErrOut)
			}
			for name, want := range tc.wantFiles {
				path := filepath.Join(d, name)
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Errorf("%s holds %q, want %q", name, got, want)
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
				}
			}
			if tc.wantFiles == nil {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("%s was created though the tenant needs no files", d)
				}
			}
		})
	}
}

func TestCredentialsErrors(t *testing.T) {
	t.Parallel()
	secretsForbidden := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New(`User "bob" cannot get resource "secrets" in API group "" in the namespace "prod"`))
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	for _, tc := range []struct {
		name  string
		objs  []client.Object
		funcs *interceptor.Funcs
		args  []string
		want  string
	}{
		{
			name: "tenant refused",
			objs: []client.Object{tenant("tenant-a", metav1.ConditionFalse, etcdv1alpha1.ReasonAuthDisabled, "set spec.security.enableAuth: true on EtcdCluster shared"), readyCluster()},
			want: "etcdtenant tenant-a is not Ready: Ready=False (AuthDisabled: set spec.security.enableAuth: true on EtcdCluster shared); its credentials do not work until it is",
		},
		{
			name: "tenant never reconciled",
			objs: []client.Object{&etcdv1alpha1.EtcdTenant{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: testNamespace}}},
			want: "etcdtenant tenant-a is not Ready: it has no Ready condition yet (is the operator running?); its credentials do not work until it is",
		},
		{
			name: "Secret gone",
			objs: []client.Object{readyTenant("tenant-a"), readyCluster()},
			want: "secret tenant-a-etcd not found in namespace prod",
		},
		{
			name: "Secret forbidden", funcs: secretsForbidden,
			objs: []client.Object{readyTenant("tenant-a"), connectionSecret("tenant-a-etcd", tlsData), readyCluster()},
			want: `User "bob" is not allowed to get secrets in namespace prod (check with: kubectl auth can-i get secrets -n prod)`,
		},
		{
			name: "TLS without --dir",
			objs: []client.Object{readyTenant("tenant-a"), connectionSecret("tenant-a-etcd", tlsData), readyCluster()},
			want: "etcdtenant tenant-a connects with TLS: give --dir DIR to write its CA, certificate and key to",
		},
		{
			name: "Secret without endpoints",
			objs: []client.Object{readyTenant("tenant-a"), connectionSecret("tenant-a-etcd", map[string]string{"prefix": "/a/"}), readyCluster()},
			want: "etcdtenant tenant-a: secret tenant-a-etcd has no endpoints",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCommand(t, tc.objs, tc.funcs, 0, append([]string{"credentials", "tenant-a"}, tc.args...)...)
			if r.err == nil || r.err.Error() != tc.want {
				t.Errorf("got error %v,\nwant %q", r.err, tc.want)
			}
			if r.out != "" {
				t.Errorf("printed %q along with its error", r.out)
			}
		})
	}
}

func TestCredentialsWarnsOfClusterNotReady(t *testing.T) {
	t.Parallel()
	c := newCluster("shared").formed("3.6.5").condition(etcdv1alpha1.ConditionReady, metav1.ConditionFalse, etcdv1alpha1.ReasonNotReady, "2 of 3 members are ready voters", time.Minute).obj()
	r := runCommand(t, []client.Object{readyTenant("tenant-a"), connectionSecret("tenant-a-etcd", passwordData), c}, nil, 0, "credentials", "tenant-a", "--env")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "Warning: etcdcluster shared is not Ready: Ready=False (NotReady: 2 of 3 members are ready voters)\n"
	if r.errOut != want {
		t.Errorf("stderr %q, want %q", r.errOut, want)
	}
	if !strings.Contains(r.out, "ETCDCTL_PASSWORD=s3cr3t") {
		t.Errorf("printed %q, want the credentials still", r.out)
	}
}
