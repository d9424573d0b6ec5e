package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Keys of a tenant's connection Secret (controllers/tenant.go, docs/tenants.md).
const (
	keyEndpoints = "endpoints"
	keyPrefix    = "prefix"
	keyCA        = "ca.crt"
)

// connection is what a tenant's connection Secret holds.
type connection struct {
	endpoints string
	prefix    string
	ca        []byte
	cert, key []byte
	user      string
	password  string
}

// files are the paths the CA, certificate and key were written to;
// empty for what the tenant does not use.
type files struct {
	ca, cert, key string
}

func connectionFrom(s *corev1.Secret) (connection, error) {
	c := connection{
		endpoints: string(s.Data[keyEndpoints]),
		prefix:    string(s.Data[keyPrefix]),
		ca:        s.Data[keyCA],
		cert:      s.Data[corev1.TLSCertKey],
		key:       s.Data[corev1.TLSPrivateKeyKey],
		user:      string(s.Data[corev1.BasicAuthUsernameKey]),
		password:  string(s.Data[corev1.BasicAuthPasswordKey]),
	}
	switch {
	case c.endpoints == "":
		return c, fmt.Errorf("secret %s has no %s", s.Name, keyEndpoints)
	case (len(c.cert) == 0) != (len(c.key) == 0):
		return c, fmt.Errorf("secret %s has only one of %s and %s", s.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return c, nil
}

// usesFiles tells whether the connection needs a CA, certificate or key
// on disk.
func (c connection) usesFiles() bool { return len(c.ca) > 0 || len(c.cert) > 0 }

// writeFiles writes the CA, certificate and key into dir, readable by
// the user alone, and returns their absolute paths.
func (c connection) writeFiles(dir string) (files, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return files{}, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return files{}, fmt.Errorf("creating %s: %w", abs, err)
	}
	var f files
	for _, w := range []struct {
		data []byte
		name string
		path *string
	}{{c.ca, keyCA, &f.ca}, {c.cert, corev1.TLSCertKey, &f.cert}, {c.key, corev1.TLSPrivateKeyKey, &f.key}} {
		if len(w.data) == 0 {
			continue
		}
		*w.path = filepath.Join(abs, w.name)
		if err := os.WriteFile(*w.path, w.data, 0o600); err != nil {
			return files{}, fmt.Errorf("writing %s: %w", *w.path, err)
		}
	}
	return f, nil
}

// settings are the etcdctl global flags of a connection, in order, as
// flag name and value.
func (c connection) settings(f files) [][2]string {
	s := [][2]string{{"endpoints", c.endpoints}}
	if f.ca != "" {
		s = append(s, [2]string{"cacert", f.ca})
	}
	if f.cert != "" {
		s = append(s, [2]string{"cert", f.cert}, [2]string{"key", f.key})
	}
	if c.user != "" {
		s = append(s, [2]string{"user", c.user})
	}
	if c.password != "" {
		s = append(s, [2]string{"password", c.password})
	}
	return s
}

// etcdctlCommand is the connection as an etcdctl command line, to which
// the user adds a command (get --prefix /tenant-a/).
func etcdctlCommand(c connection, f files) string {
	parts := []string{"etcdctl"}
	for _, kv := range c.settings(f) {
		parts = append(parts, "--"+kv[0]+"="+shellQuote(kv[1]))
	}
	return strings.Join(parts, " ") + "\n"
}

// envFile is the connection as ETCDCTL_* variables, one a line, that a
// shell can source and docker --env-file can read.
func envFile(tenant string, c connection, f files) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# etcdctl settings of EtcdTenant %s", tenant)
	if c.prefix != "" {
		fmt.Fprintf(&b, "; it may read and write keys under %s only", c.prefix)
	}
	b.WriteString("\n")
	for _, kv := range c.settings(f) {
		fmt.Fprintf(&b, "ETCDCTL_%s=%s\n", strings.ToUpper(kv[0]), shellQuote(kv[1]))
	}
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:,=@%+-]+$`)

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

type credentialsOptions struct {
	env bool
	dir string
}

func newCredentialsCommand(o *Options) *cobra.Command {
	var co credentialsOptions
	cmd := &cobra.Command{
		Use:   "credentials TENANT",
		Short: "Print an EtcdTenant's connection as an etcdctl command line or env file",
		Long: `Print an EtcdTenant's connection Secret as an etcdctl command line, or with
--env as ETCDCTL_* variables. When the tenant connects with TLS, --dir
names a directory to write ca.crt, tls.crt and tls.key to (readable by you
alone); the output refers to them there. The endpoints are the cluster's
client Service, reachable from inside the Kubernetes cluster.`,
		Example: `  kubectl etcd credentials tenant-a --dir ./tenant-a
  eval "$(kubectl etcd credentials tenant-a --dir ./tenant-a) get --prefix /tenant-a/"
  kubectl etcd credentials tenant-a --dir ./tenant-a --env > tenant-a.env`,
		Args: oneName("EtcdTenant"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session()
			if err != nil {
				return err
			}
			return s.credentials(cmd.Context(), args[0], co)
		},
	}
	cmd.Flags().BoolVar(&co.env, "env", false, "Print ETCDCTL_* variables, one a line, instead of a command line.")
	cmd.Flags().StringVar(&co.dir, "dir", "", "Directory to write the tenant's ca.crt, tls.crt and tls.key to (needed when it uses TLS).")
	return cmd
}

func (s *session) credentials(ctx context.Context, name string, co credentialsOptions) error {
	t := &etcdv1alpha1.EtcdTenant{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, t); err != nil {
		return apiError(err, "get", resourceTenants, "etcdtenant", name, s.namespace)
	}
	if !isTrue(t.Status.Conditions, etcdv1alpha1.ConditionReady) {
		return fmt.Errorf("etcdtenant %s is not Ready%s; its credentials do not work until it is", name, readiness(t.Status.Conditions))
	}
	secretName := t.Status.SecretName
	if secretName == "" {
		secretName = t.ConnectionSecretName()
	}
	secret := &corev1.Secret{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: secretName}, secret); err != nil {
		return apiError(err, "get", resourceSecrets, "secret", secretName, s.namespace)
	}
	conn, err := connectionFrom(secret)
	if err != nil {
		return fmt.Errorf("etcdtenant %s: %w", name, err)
	}
	if conn.usesFiles() && co.dir == "" {
		return errors.New("etcdtenant " + name + " connects with TLS: give --dir DIR to write its CA, certificate and key to")
	}
	var f files
	if conn.usesFiles() {
		if f, err = conn.writeFiles(co.dir); err != nil {
			return err
		}
	}
	s.warnClusterNotReady(ctx, t.Spec.ClusterName)
	if co.env {
		_, err = fmt.Fprint(s.Out, envFile(name, conn, f))
		return err
	}
	if conn.prefix != "" {
		if _, err := fmt.Fprintf(s.ErrOut, "# etcdtenant %s may read and write keys under %s only\n", name, conn.prefix); err != nil {
			return err
		}
	}
	_, err = fmt.Fprint(s.Out, etcdctlCommand(conn, f))
	return err
}

// warnClusterNotReady says on stderr when the tenant's cluster is not
// Ready: the credentials are right but the cluster may not answer. A
// cluster the user may not read is no reason to fail.
func (s *session) warnClusterNotReady(ctx context.Context, name string) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, c); err != nil {
		return
	}
	if !isTrue(c.Status.Conditions, etcdv1alpha1.ConditionReady) {
		_, _ = fmt.Fprintf(s.ErrOut, "Warning: etcdcluster %s is not Ready%s\n", name, readiness(c.Status.Conditions)) // a warning; the credentials follow
	}
}

func isTrue(conds []metav1.Condition, t string) bool {
	return meta.IsStatusConditionTrue(conds, t)
}
