package support

import (
	"errors"
	"fmt"
	"os"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Scheme knows the built-in kinds and ours.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registrations do not fail
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cmapi.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// StartEnvtest starts kube-apiserver and etcd (built into bin/ by `make
// envtest-assets`, found through KUBEBUILDER_ASSETS) with the CRDs in
// crdDir, and returns a client and the function that stops them.
func StartEnvtest(crdDir string) (*rest.Config, client.Client, func(), error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and etcd into bin/ and points KUBEBUILDER_ASSETS at them")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true,
		// kube-apiserver takes 10 to 20 s to become ready while the
		// local cluster's suites and builds share the 2 cores; envtest
		// gives it 20 s by default and gave up five times in a row once.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	stop := func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping kube-apiserver and etcd: %v\n", err)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		stop() // the processes that did start
		return nil, nil, nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return cfg, c, stop, nil
}
