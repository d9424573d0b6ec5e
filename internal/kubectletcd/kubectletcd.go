// Package kubectletcd is the kubectl etcd plugin: commands that show and
// steer EtcdClusters and EtcdTenants with the user's kubeconfig and
// context, as every kubectl plugin does. Everything it shows is read
// from the API server: the status the operator keeps and the member Pods.
package kubectletcd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// Scheme holds the kinds the plugin reads: EtcdClusters, EtcdTenants,
// Pods and Secrets.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(etcdv1alpha1.AddToScheme(s))
	return s
}

// Options is what every command needs: where to write, how to reach the
// API server and which namespace to use. Tests replace NewClient,
// Namespace, Now and Width.
type Options struct {
	genericiooptions.IOStreams

	// NewClient builds the API client from the kubeconfig flags.
	NewClient func() (client.Client, error)
	// Namespace is -n, or else the namespace of the kubeconfig context.
	Namespace func() (string, error)
	// Now is the clock condition ages and probe times are measured with.
	Now func() time.Time
	// Width is the terminal width of Out, 0 when Out is not a terminal
	// (then tables are never narrowed nor messages wrapped).
	Width func() int
	// ForwardPort reaches a Pod's port (status --live).
	ForwardPort PortForwarder
	// NewEtcdClient connects to etcd (status --live).
	NewEtcdClient func(etcd.Config) (etcd.Client, error)
	// WaitPoll is how often --wait looks; a second when 0.
	WaitPoll time.Duration
}

// NewCommand is the kubectl etcd root command, reaching the cluster with
// the standard kubeconfig flags (-n, --context, --kubeconfig and the rest).
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	o := &Options{
		IOStreams: streams,
		NewClient: func() (client.Client, error) {
			cfg, err := flags.ToRESTConfig()
			if err != nil {
				return nil, err
			}
			mapper, err := flags.ToRESTMapper()
			if err != nil {
				return nil, err
			}
			return client.New(cfg, client.Options{Scheme: Scheme(), Mapper: mapper})
		},
		Namespace: func() (string, error) {
			ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
			return ns, err
		},
		Now:   time.Now,
		Width: func() int { return terminalWidth(streams.Out) },
		ForwardPort: func(ctx context.Context, namespace, pod string, port int) (string, func(), error) {
			cfg, err := flags.ToRESTConfig()
			if err != nil {
				return "", nil, err
			}
			return forwardPort(cfg)(ctx, namespace, pod, port)
		},
		NewEtcdClient: etcd.New,
	}
	cmd := newRootCommand(o)
	flags.AddFlags(cmd.PersistentFlags())
	return cmd
}

func newRootCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-etcd",
		Short: "Show and steer etcd clusters run by the etcd operator",
		Long: `Show and steer etcd clusters run by the etcd operator (EtcdCluster and
EtcdTenant, etcd.aenix.io/v1alpha1), from the status the operator keeps
and the member Pods.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	cmd.AddCommand(
		newStatusCommand(o),
		newMembersCommand(o),
		newPauseCommand(o, true),
		newPauseCommand(o, false),
		newMoveLeaderCommand(o),
		newDefragCommand(o),
		newCredentialsCommand(o),
	)
	return cmd
}

// session is what a command run needs: a client and the namespace.
type session struct {
	*Options
	client    client.Client
	namespace string
}

func (o *Options) session() (*session, error) {
	ns, err := o.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return &session{Options: o, client: c, namespace: ns}, nil
}

// oneName checks that a command got exactly one argument, the name of
// the object it acts on, and says so in the user's terms when not.
func oneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s takes the name of one %s: %s", cmd.CommandPath(), what, cmd.UseLine())
		}
		return nil
	}
}

func terminalWidth(out any) int {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return w
}

// getCluster reads an EtcdCluster, with errors a user can act on.
func (s *session) getCluster(ctx context.Context, name string) (*etcdv1alpha1.EtcdCluster, error) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, c); err != nil {
		return nil, apiError(err, "get", resourceClusters, "etcdcluster", name, s.namespace)
	}
	return c, nil
}
