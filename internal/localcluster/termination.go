package localcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// The limits a kubelet applies to termination messages
// (pkg/kubelet/container: MaxContainerTerminationMessageLength,
// MaxContainerTerminationMessageLogLength and
// MaxContainerTerminationMessageLogLines).
const (
	maxTerminationMessage         = 4096
	maxTerminationMessageLogBytes = 2048
	maxTerminationMessageLogLines = 80
)

// terminationLog is the host file of a container that is bound at its
// terminationMessagePath: one per container, emptied at each start.
func terminationLog(podDir, container string) string {
	return filepath.Join(podDir, "containers", container, "termination-log")
}

// terminationMessagePath is where the container's termination message is
// written inside it: its terminationMessagePath, which the API server
// defaults to /dev/termination-log.
func terminationMessagePath(c *corev1.Container) string {
	if c.TerminationMessagePath != "" {
		return c.TerminationMessagePath
	}
	return corev1.TerminationMessagePathDefault
}

// resetTerminationLog creates the termination log empty, or empties it, for
// a new run of the container.
func resetTerminationLog(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		return err
	}
	// Any user of the container may write it, as a kubelet allows.
	return os.Chmod(path, 0o666)
}

// terminationMessage is the message of a run that ended with exitCode, as a
// kubelet makes it: the last 4096 bytes of the termination log; when that
// is empty, the run failed and the policy is FallbackToLogsOnError, the
// last 80 lines of the run's log, at most their last 2048 bytes.
func terminationMessage(policy corev1.TerminationMessagePolicy, termLog, runLog string, exitCode int) string {
	data, err := readTail(termLog, maxTerminationMessage)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return fmt.Sprintf("Error on reading termination log %s: %v", termLog, err)
	case len(data) > 0:
		return string(data)
	}
	if policy != corev1.TerminationMessageFallbackToLogsOnError || exitCode == 0 {
		return ""
	}
	// The last 2048 bytes of the last 80 lines are the last 80 lines of
	// the last 2048 bytes.
	data, err = readTail(runLog, maxTerminationMessageLogBytes)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(lastLines(data, maxTerminationMessageLogLines))
}

// readTail reads the last max bytes of the file at path.
func readTail(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, maxBytes))
}
