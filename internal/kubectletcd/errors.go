package kubectletcd

import (
	"errors"
	"fmt"
	"net"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Resources as kubectl auth can-i names them.
const (
	resourceClusters = "etcdclusters.etcd.aenix.io"
	resourceTenants  = "etcdtenants.etcd.aenix.io"
	resourcePods     = "pods"
	resourceSecrets  = "secrets"
)

var forbiddenUser = regexp.MustCompile(`User "([^"]*)"`)

// apiError turns an error from the API server into one a user can act
// on: what was not found where, or which verb on which resource they
// lack. kind is how the message names the object ("etcdcluster"); name
// is empty for a list.
func apiError(err error, verb, resource, kind, name, namespace string) error {
	var status apierrors.APIStatus
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the API server does not serve %s: is the etcd operator installed in this cluster (its CRDs)?", resource)
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %s not found in namespace %s", kind, name, namespace)
	case apierrors.IsForbidden(err):
		who := "you are"
		if errors.As(err, &status) {
			if m := forbiddenUser.FindStringSubmatch(status.Status().Message); m != nil {
				who = fmt.Sprintf("User %q is", m[1])
			}
		}
		return fmt.Errorf("%s not allowed to %s %s in namespace %s (check with: kubectl auth can-i %s %s -n %s)", who, verb, resource, namespace, verb, resource, namespace)
	case apierrors.IsUnauthorized(err):
		return errors.New("the API server did not accept your credentials (401 Unauthorized): log in again, or check --context and --kubeconfig")
	case unreachable(err):
		return fmt.Errorf("cannot reach the API server: %w (check --context and --kubeconfig)", err)
	case name != "":
		return fmt.Errorf("cannot %s %s %s in namespace %s: %w", verb, kind, name, namespace, err)
	default:
		return fmt.Errorf("cannot %s %s in namespace %s: %w", verb, resource, namespace, err)
	}
}

// unreachable tells whether err is a failure to connect to the API
// server at all.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}
