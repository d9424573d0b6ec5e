// Command cert-manager-controller runs the cert-manager controllers that the
// local test cluster needs (Certificates, CertificateRequests through the
// approver and the CA and SelfSigned issuers, Issuers and ClusterIssuers),
// built from the github.com/cert-manager/cert-manager module on the Go module
// proxy, because cert-manager's own cmd/controller module is not published
// there.
//
// It connects with --kubeconfig (default $KUBECONFIG, else the in-cluster
// config), stores the Secrets of ClusterIssuers in --namespace, and runs until
// SIGINT or SIGTERM. Leader election is off unless --leader-elect is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Defaults below are cert-manager's own controller defaults
// (internal/apis/config/controller/v1alpha1/defaults.go in v1.21.2).
const (
	defaultKubernetesAPIQPS        = 20
	defaultKubernetesAPIBurst      = 50
	defaultMaxConcurrentChallenges = 60
	defaultMinimumBackoff          = time.Hour
	defaultMaximumBackoff          = 32 * time.Hour
	defaultWorkers                 = 5
	// leaseName is the Lease that cert-manager's controller uses.
	leaseName = "cert-manager-controller"
)

var defaultCopiedAnnotationPrefixes = []string{
	"*",
	"-kubectl.kubernetes.io/",
	"-fluxcd.io/",
	"-argocd.argoproj.io/",
}

// options holds the command line.
type options struct {
	kubeconfig              string
	namespace               string
	leaderElect             bool
	leaderElectionNamespace string
	workers                 int
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "cert-manager-controller: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "cert-manager-controller: fatal: %v\n", err)
		os.Exit(1)
	}
	klog.Info("cert-manager controller stopped")
	klog.Flush()
}

// parseFlags parses args (without the program name) and sets up klog, whose
// flags (-v, --vmodule, ...) are accepted as well. The default verbosity is
// cert-manager's InfoLevel (2).
func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("cert-manager-controller", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", fmt.Sprint(logf.InfoLevel)); err != nil {
		return nil, err
	}

	opts := &options{}
	fs.StringVar(&opts.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"path to a kubeconfig file (default $KUBECONFIG; if both are empty the in-cluster config is used)")
	fs.StringVar(&opts.namespace, "namespace", "cert-manager",
		"cluster resource namespace: where the Secrets referenced by ClusterIssuers live")
	fs.BoolVar(&opts.leaderElect, "leader-elect", false,
		"run leader election (Lease "+leaseName+") before starting the controllers")
	fs.StringVar(&opts.leaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader election Lease (default: the --namespace value)")
	fs.IntVar(&opts.workers, "workers", defaultWorkers, "worker goroutines per controller")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	// $KUBECONFIG may be a list; cert-manager loads a single file.
	if list := filepath.SplitList(opts.kubeconfig); len(list) > 1 {
		return nil, fmt.Errorf("kubeconfig %q is a list of files; pass a single file with --kubeconfig", opts.kubeconfig)
	}
	if opts.namespace == "" {
		return nil, errors.New("--namespace must not be empty")
	}
	if opts.workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1, got %d", opts.workers)
	}
	if opts.leaderElectionNamespace == "" {
		opts.leaderElectionNamespace = opts.namespace
	}
	return opts, nil
}

// contextOptions returns the controller context options: cert-manager's
// defaults, watching every namespace, ambient credentials off.
func contextOptions(opts *options) controller.ContextOptions {
	return controller.ContextOptions{
		Kubeconfig:         opts.kubeconfig,
		KubernetesAPIQPS:   defaultKubernetesAPIQPS,
		KubernetesAPIBurst: defaultKubernetesAPIBurst,
		Namespace:          "", // all namespaces
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        opts.namespace,
			ClusterIssuerAmbientCredentials: false,
			IssuerAmbientCredentials:        false,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           false,
			CopiedAnnotationPrefixes:                 defaultCopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: defaultMinimumBackoff,
			CertificateRequestMaximumBackoffDuration: defaultMaximumBackoff,
		},
		SchedulerOptions: controller.SchedulerOptions{
			MaxConcurrentChallenges: defaultMaxConcurrentChallenges,
		},
	}
}

// run connects to the cluster and runs the controllers until ctx is done.
// It returns nil after a clean shutdown.
func run(ctx context.Context, opts *options) error {
	log := klog.Background().WithName("cert-manager-controller")
	ctx = logf.NewContext(ctx, log)

	where := opts.kubeconfig
	if where == "" {
		where = "in-cluster config"
	}
	log.Info("connecting to the API server", "kubeconfig", where,
		"clusterResourceNamespace", opts.namespace, "leaderElect", opts.leaderElect)

	ctxFactory, err := controller.NewContextFactory(ctx, contextOptions(opts))
	if err != nil {
		if opts.kubeconfig == "" {
			return fmt.Errorf("building controller context (no --kubeconfig or $KUBECONFIG, so the in-cluster config was tried): %w", err)
		}
		return fmt.Errorf("building controller context from %s: %w", opts.kubeconfig, err)
	}

	if !opts.leaderElect {
		return runControllers(ctx, ctxFactory, opts.workers)
	}
	return runWithLeaderElection(ctx, ctxFactory, opts)
}

// runControllers constructs every registered controller, starts the shared
// informer factories, waits for their caches and runs the controllers until
// ctx is done.
func runControllers(ctx context.Context, ctxFactory *controller.ContextFactory, workers int) error {
	log := logf.FromContext(ctx)

	known := controller.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)

	// Constructing a controller registers its informers with the shared
	// factories, so this comes before the factories are started.
	controllers := make(map[string]controller.Interface, len(names))
	for _, name := range names {
		iface, err := known[name](ctxFactory)
		if err != nil {
			return fmt.Errorf("constructing controller %q: %w", name, err)
		}
		controllers[name] = iface
	}
	log.Info("constructed controllers", "controllers", names)

	// Every Context built by the factory shares the same informer factories.
	cctx, err := ctxFactory.Build()
	if err != nil {
		return fmt.Errorf("building controller context: %w", err)
	}
	stopCh := ctx.Done()
	cctx.KubeSharedInformerFactory.Start(stopCh)
	cctx.SharedInformerFactory.Start(stopCh)
	cctx.HTTP01ResourceMetadataInformersFactory.Start(stopCh)
	if cctx.GatewaySolverEnabled {
		cctx.GWShared.Start(stopCh)
	}

	log.Info("waiting for informer caches to sync")
	var unsynced []string
	for typ, ok := range cctx.SharedInformerFactory.WaitForCacheSync(stopCh) {
		if !ok {
			unsynced = append(unsynced, typ.String())
		}
	}
	for typ, ok := range cctx.KubeSharedInformerFactory.WaitForCacheSync(stopCh) {
		if !ok {
			unsynced = append(unsynced, typ)
		}
	}
	for typ, ok := range cctx.HTTP01ResourceMetadataInformersFactory.WaitForCacheSync(stopCh) {
		if !ok {
			unsynced = append(unsynced, typ.String())
		}
	}
	if ctx.Err() != nil {
		log.Info("stopped before the informer caches synced")
		return nil
	}
	if len(unsynced) > 0 {
		slices.Sort(unsynced)
		return fmt.Errorf("informer caches did not sync: %s", strings.Join(unsynced, ", "))
	}
	log.Info("informer caches synced; starting controllers", "workers", workers)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, name := range names {
		iface := controllers[name]
		wg.Go(func() {
			if err := iface.Run(workers, runCtx); err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("controller %q: %w", name, err) })
				cancel()
			}
		})
	}
	wg.Wait()

	cctx.KubeSharedInformerFactory.Shutdown()
	cctx.SharedInformerFactory.Shutdown()
	cctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cctx.GWShared.Shutdown()

	if firstErr != nil {
		return firstErr
	}
	log.Info("control loops exited")
	return nil
}

// runWithLeaderElection runs the controllers while this process holds the
// Lease. Losing the Lease is an error: the caller exits non-zero, as
// cert-manager does.
func runWithLeaderElection(ctx context.Context, ctxFactory *controller.ContextFactory, opts *options) error {
	log := logf.FromContext(ctx, "leader-election")

	cctx, err := ctxFactory.Build("leader-election")
	if err != nil {
		return fmt.Errorf("building leader election context: %w", err)
	}
	client, err := kubernetes.NewForConfig(cctx.RESTConfig)
	if err != nil {
		return fmt.Errorf("creating leader election client: %w", err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting hostname for the leader election identity: %w", err)
	}
	id := fmt.Sprintf("%s_%d", hostname, os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock,
		opts.leaderElectionNamespace, leaseName,
		client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: cctx.Recorder})
	if err != nil {
		return fmt.Errorf("creating leader election lock: %w", err)
	}

	// OnStartedLeading runs in its own goroutine and the elector does not
	// wait for it, so whether it started and how it ended come back through
	// channels.
	electCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	done := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   60 * time.Second,
		RenewDeadline:   40 * time.Second,
		RetryPeriod:     15 * time.Second,
		ReleaseOnCancel: true,
		Name:            leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leCtx context.Context) {
				close(started)
				log.Info("became leader", "identity", id)
				done <- runControllers(leCtx, ctxFactory, opts.workers)
				// Give up the Lease if the controllers stopped by themselves.
				cancel()
			},
			OnStoppedLeading: func() {
				log.Info("stopped leading", "identity", id)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	log.Info("waiting to acquire the leader election Lease",
		"namespace", opts.leaderElectionNamespace, "name", leaseName, "identity", id)
	// Run returns when electCtx is done or the Lease is lost, after
	// cancelling the context it passed to OnStartedLeading.
	elector.Run(electCtx)

	select {
	case <-started:
	default:
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("leader election ended before the Lease was acquired")
	}
	if err := <-done; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("leader election lost")
}
