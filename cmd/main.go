// Command manager runs the etcd operator: a controller-runtime manager with
// one reconciler per concern.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/controllers"
	"github.com/etcd-operator/etcd-operator/internal/crashpoint"
)

// watchNamespaceEnv names the namespaces to watch, comma-separated; empty
// means all. OLM sets it from the OperatorGroup's target namespaces.
const watchNamespaceEnv = "WATCH_NAMESPACE"

// operatorImageEnv names the operator's own image, which EtcdBackups'
// Pods run (`manager backup run`); the manifests copy it from the
// operator's container.
const operatorImageEnv = "OPERATOR_IMAGE"

// operatorConditionEnv names the operator's OperatorCondition; OLM sets it
// in the operator's containers.
const operatorConditionEnv = "OPERATOR_CONDITION_NAME"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "backup" {
		os.Exit(backupMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "restore" {
		os.Exit(restoreMain(os.Args[2:]))
	}
	var (
		metricsAddr   string
		probeAddr     string
		leaderElect   bool
		secureMetrics bool
		enableHTTP2   bool
		probeInterval time.Duration
		pprofAddr     string
		lease         leaseTimes
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address the metrics endpoint binds to, e.g. :8443; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the health probe endpoint binds to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one manager reconciles at a time.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Serve metrics over HTTP/2 too (off: HTTP/2 stream attacks).")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address Go's pprof endpoints bind to, e.g. 127.0.0.1:8082, to profile the operator; empty disables them.")
	flag.DurationVar(&lease.duration, "leader-elect-lease-duration", 15*time.Second, "How long a leader's lease lasts: the operator that follows one that crashed waits this long before it reconciles.")
	flag.DurationVar(&lease.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader tries to renew its lease before it gives leadership up; shorter than the lease duration.")
	flag.DurationVar(&lease.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the operators try to take or renew the lease; shorter than the renew deadline.")
	flag.DurationVar(&probeInterval, "probe-interval", controllers.DefaultProbeInterval, "How often the health reconciler probes every member of a cluster.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")
	if err := lease.validate(); err != nil {
		setupLog.Error(err, "Invalid leader election flags")
		os.Exit(2)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))
	utilruntime.Must(operatorsv2.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	namespaces := watchNamespaces(os.Getenv(watchNamespaceEnv))
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "etcd-operator.etcd.aenix.io",
		// The process exits right after the manager stops, so handing the
		// lease over at once is safe and spares the next leader a wait.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease.duration,
		RenewDeadline:                 &lease.renewDeadline,
		RetryPeriod:                   &lease.retryPeriod,
		// Only the Secrets, Pods, claims, Services and PDBs the operator
		// labels; the others it asks for are read live.
		Cache:     controllers.CacheOptions(namespaces),
		NewClient: controllers.NewClient,
	})
	if err != nil {
		setupLog.Error(err, "Unable to create manager")
		os.Exit(1)
	}
	secretNames, err := controllers.NewSecretNamesCache(mgr, namespaces)
	if err != nil {
		setupLog.Error(err, "Unable to create the cache of Secret names")
		os.Exit(1)
	}
	// Members are reached with the cluster's client certificate, which is
	// a user's Secret when the user provides TLS.
	newEtcdClient := controllers.NewEtcdClientFactory(mgr.GetClient())

	if err := (&controllers.TopologyReconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("etcd-operator-cluster"),
		NewEtcdClient: newEtcdClient,
		CrashPoints:   crashpoint.FromEnv(),
		Image:         os.Getenv(operatorImageEnv),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdcluster")
		os.Exit(1)
	}
	if err := (&controllers.HealthReconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("etcd-operator-health"),
		NewEtcdClient: newEtcdClient,
		Interval:      probeInterval,
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdcluster-health")
		os.Exit(1)
	}

	backupPods, err := controllers.NewBackupPodsCache(mgr, namespaces)
	if err != nil {
		setupLog.Error(err, "Unable to create the cache of backup Pods")
		os.Exit(1)
	}
	if err := (&controllers.BackupReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("etcd-operator-backup"),
		Image:    os.Getenv(operatorImageEnv),
	}).SetupWithManager(mgr, backupPods); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdbackup")
		os.Exit(1)
	}

	if err := (&controllers.BackupScheduleReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("etcd-operator-backup-schedule"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdbackupschedule")
		os.Exit(1)
	}

	certManager := controllers.CertManagerInstalled(mgr.GetRESTMapper())
	if !certManager {
		setupLog.Info("The cert-manager API (cert-manager.io/v1) is not served: clusters with spec.security.tls.certManager wait until it is installed and the operator restarted")
	}
	if err := (&controllers.TenantReconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("etcd-operator-tenant"),
		CertManager:   certManager,
		NewEtcdClient: newEtcdClient,
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdtenant")
		os.Exit(1)
	}
	if err := (&controllers.PKIReconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("etcd-operator-pki"),
		CertManager:   certManager,
		NewEtcdClient: newEtcdClient,
		SecretNames:   secretNames,
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Unable to set up controller", "controller", "etcdcluster-pki")
		os.Exit(1)
	}

	if os.Getenv(operatorConditionEnv) != "" {
		// Installed by OLM: it holds the operator's upgrades while a
		// cluster changes. Without the condition an upgrade is not held,
		// but the operator still runs every cluster.
		if err := setupUpgradeable(mgr); err != nil {
			setupLog.Error(err, "Unable to report Upgradeable to OLM: OLM may upgrade the operator in the middle of a change")
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up ready check")
		os.Exit(1)
	}

	setupLog.Info("Starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}

// setupUpgradeable starts the reconciler of the Upgradeable condition of
// the OperatorCondition OLM made for the operator (operator-lib finds it
// from OPERATOR_CONDITION_NAME and the Pod's namespace). Its client reads
// live: OLM lets the operator get and update that one object, not list or
// watch OperatorConditions, as a cache would.
func setupUpgradeable(mgr ctrl.Manager) error {
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	cond, err := conditions.InClusterFactory{Client: live}.NewCondition(operatorsv2.ConditionType(operatorsv2.Upgradeable))
	if err != nil {
		return err
	}
	return (&controllers.UpgradeableReconciler{Client: mgr.GetClient(), Condition: cond}).SetupWithManager(mgr)
}

// leaseTimes are the leader election's timings, from the flags.
type leaseTimes struct {
	duration, renewDeadline, retryPeriod time.Duration
}

// validate refuses timings the leader election cannot keep, naming the
// flags to change.
func (l leaseTimes) validate() error {
	switch {
	case l.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period=%s: give a positive duration", l.retryPeriod)
	case l.renewDeadline <= l.retryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline=%s must be longer than --leader-elect-retry-period=%s", l.renewDeadline, l.retryPeriod)
	case l.duration <= l.renewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration=%s must be longer than --leader-elect-renew-deadline=%s", l.duration, l.renewDeadline)
	}
	return nil
}

// watchNamespaces turns the comma-separated WATCH_NAMESPACE value into the
// cache's namespaces; nil (all namespaces) when it is empty.
func watchNamespaces(value string) map[string]cache.Config {
	var namespaces map[string]cache.Config
	for _, ns := range strings.Split(value, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if namespaces == nil {
			namespaces = map[string]cache.Config{}
		}
		namespaces[ns] = cache.Config{}
	}
	return namespaces
}
