// Command kubectl-etcd is the kubectl etcd plugin: kubectl runs any
// kubectl-etcd on the PATH as "kubectl etcd". The commands live in
// internal/kubectletcd.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcd-operator/etcd-operator/internal/kubectletcd"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command and returns the exit code. Errors are printed
// as one line, never as a stack trace: a panic is reported as an
// internal error.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			_, _ = fmt.Fprintf(stderr, "error: internal error in kubectl etcd: %v (please report it)\n", r)
			code = 2
		}
	}()
	// Errors reach the user as the command's error, not as logs:
	// client-go logs through klog (discovery failures, for one), and
	// controller-runtime's client warns, with a stack trace, when it logs
	// and no logger was set.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	cmd := kubectletcd.NewCommand(genericiooptions.IOStreams{In: stdin, Out: stdout, ErrOut: stderr})
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		_, _ = fmt.Fprintf(stderr, "error: %v\n", err) // nowhere left to report a failed write
		return 1
	}
	return 0
}
