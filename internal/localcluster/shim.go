package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ShimCommand is the subcommand of the localcluster binary that turns
// itself into a container: the node agent starts it in a new mount and UTS
// namespace, it builds the container's root, enters the pod's network
// namespace and executes the container's command in its place.
const ShimCommand = "shim"

// imageBinDir is where a container finds its image's binaries by name, as
// in the real image (etcdutl, for a program that execs it): a directory
// of the container's root with one symlink per binary to its host path
// (the binaries' directory is bound at its own path), which the node agent
// puts first on the container's PATH.
const imageBinDir = "/localcluster-image-bin"

// shimSpec is what the shim needs to become a container.
type shimSpec struct {
	Netns    string      `json:"netns"`
	Rootfs   string      `json:"rootfs"`
	Hostname string      `json:"hostname"`
	BinDir   string      `json:"binDir"`
	Mounts   []shimMount `json:"mounts"`
	Argv     []string    `json:"argv"`
	Env      []string    `json:"env"`
	WorkDir  string      `json:"workDir"`
	// ImageBinaries are the image's binaries, command name to host path,
	// linked in imageBinDir.
	ImageBinaries map[string]string `json:"imageBinaries,omitempty"`
}

// shimMount binds Source (a host path) at Target inside the container.
type shimMount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
}

// hostDirs are the host directories a container sees read-only: programs,
// libraries and /etc. Everything else in its root is its own.
var hostDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc"}

// entryWiseDirs are the host directories bound entry by entry instead of as
// a whole, so volumes can be mounted at new paths in them (/etc/etcd-client,
// say) as in a real image, where /etc is the image's own, and so files
// bound at new paths in /dev (the termination log) are the container's
// own, not new files in the host's /dev.
var entryWiseDirs = map[string]bool{"/etc": true, "/dev": true}

// RunShim becomes the container described by the spec file. It only returns
// on error.
func RunShim(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec shimSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("reading %s: %w", specPath, err)
	}
	// Namespaces belong to threads until exec.
	runtime.LockOSThread()
	if err := buildRoot(spec); err != nil {
		return fmt.Errorf("building the container root: %w", err)
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return fmt.Errorf("setting the hostname: %w", err)
	}
	netns, err := os.Open(spec.Netns)
	if err != nil {
		return fmt.Errorf("opening the pod's network namespace: %w", err)
	}
	if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering the pod's network namespace: %w", err)
	}
	_ = netns.Close()
	if err := unix.Chroot(spec.Rootfs); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	workDir := spec.WorkDir
	if workDir == "" {
		workDir = "/"
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	if err := unix.Chdir(workDir); err != nil {
		return fmt.Errorf("changing to the working directory %s: %w", workDir, err)
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("no command to run")
	}
	return unix.Exec(spec.Argv[0], spec.Argv, spec.Env)
}

// buildRoot assembles the container's root directory in a private tmpfs:
// the host's program and library directories read-only, /dev (entry by
// entry), /proc and /sys from the host, its own /tmp and /run, the
// project's binaries with the image's linked by name in imageBinDir, and
// the pod's volumes and termination log at their paths.
func buildRoot(spec shimSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	root := spec.Rootfs
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=256m,mode=755"); err != nil {
		return fmt.Errorf("mounting the root tmpfs: %w", err)
	}
	for _, dir := range hostDirs {
		if err := bindHost(root, dir, true); err != nil {
			return err
		}
	}
	for _, dir := range []string{"/dev", "/proc", "/sys"} {
		if err := bindHost(root, dir, dir == "/sys"); err != nil {
			return err
		}
	}
	for _, dir := range []string{"/tmp", "/run", "/var/tmp", "/root"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o1777); err != nil {
			return err
		}
	}
	if spec.BinDir != "" {
		if err := bindMount(spec.BinDir, filepath.Join(root, spec.BinDir), true); err != nil {
			return err
		}
	}
	if err := linkImageBinaries(filepath.Join(root, imageBinDir), spec.ImageBinaries); err != nil {
		return err
	}
	for _, m := range spec.Mounts {
		if err := bindMount(m.Source, filepath.Join(root, m.Target), m.ReadOnly); err != nil {
			return err
		}
	}
	return nil
}

// linkImageBinaries makes dir hold a symlink named after each of binaries
// to its host path; with no binaries there is no dir.
func linkImageBinaries(dir string, binaries map[string]string) error {
	if len(binaries) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, target := range binaries {
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			return fmt.Errorf("linking the image's binaries: %q is no command name", name)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("linking the image's binaries: %w", err)
		}
	}
	return nil
}

// bindHost makes the host's directory dir appear at the same path under
// root, entry by entry when it is one of entryWiseDirs.
func bindHost(root, dir string, readOnly bool) error {
	if entryWiseDirs[dir] {
		return bindHostEntries(root, dir, readOnly)
	}
	return bindHostPath(root, dir, readOnly)
}

// bindHostPath makes the host's path appear at the same path under root:
// a symlink is copied (merged-/usr systems link /bin to usr/bin), a
// directory is bind-mounted.
func bindHostPath(root, path string, readOnly bool) error {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(root, path))
	}
	return bindMount(path, filepath.Join(root, path), readOnly)
}

// bindHostEntries makes the host's directory path appear at the same path
// under root as a directory of root's own holding each of its entries,
// bound (or, for symlinks, copied) one by one.
func bindHostEntries(root, path string, readOnly bool) error {
	entries, err := os.ReadDir(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, path), 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if err := bindHostPath(root, filepath.Join(path, e.Name()), readOnly); err != nil {
			return err
		}
	}
	return nil
}

// bindMount binds source at target, creating target as a directory or an
// empty file to match source.
func bindMount(source, target string, readOnly bool) error {
	fi, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	if _, statErr := os.Stat(target); statErr == nil {
		// The mount point exists (a file in the read-only /etc, say).
	} else if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("creating mount point %s: %w", target, err)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s at %s: %w", source, target, err)
	}
	if readOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", target, err)
		}
	}
	return nil
}
