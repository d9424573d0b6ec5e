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
// of the container's root with one symlink per binary to where the
// container sees it (in containerBinDir), which the node agent puts first
// on the container's PATH.
const imageBinDir = "/localcluster-image-bin"

// containerBinDir is where a container sees the binaries' directory
// (Config.BinDir), read-only, and where the node agent runs them from: a
// path of its own, which no volume of the container hides, as one can
// hide the host's path (OLM's emptyDir at /tmp, with the repository cloned
// under /tmp).
const containerBinDir = "/localcluster-bin"

// binPaths is the host's binaries' directory; its methods give the paths
// at which a container sees what is in it.
type binPaths string

// path is where a container sees host path p.
func (b binPaths) path(p string) string {
	dir := filepath.Clean(string(b))
	switch {
	case b == "":
		return p
	case p == dir:
		return containerBinDir
	case strings.HasPrefix(p, dir+"/"):
		return containerBinDir + p[len(dir):]
	}
	return p
}

// argv is argv with each host path in the binaries' directory as the
// container sees it.
func (b binPaths) argv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = b.path(a)
	}
	return out
}

// binaries is the image's binaries, each at the path the container sees.
func (b binPaths) binaries(binaries map[string]string) map[string]string {
	if binaries == nil {
		return nil
	}
	out := make(map[string]string, len(binaries))
	for name, p := range binaries {
		out[name] = b.path(p)
	}
	return out
}

// shimSpec is what the shim needs to become a container.
type shimSpec struct {
	Netns    string `json:"netns"`
	Rootfs   string `json:"rootfs"`
	Hostname string `json:"hostname"`
	// BinDir is the host's binaries' directory, which the container sees
	// at containerBinDir.
	BinDir string      `json:"binDir"`
	Mounts []shimMount `json:"mounts"`
	// Argv is the command line as the container sees it.
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	WorkDir string   `json:"workDir"`
	// ImageBinaries are the image's binaries, command name to the path
	// the container sees, linked in imageBinDir.
	ImageBinaries map[string]string `json:"imageBinaries,omitempty"`
	// ImageFiles are the image's own files, container path to host path,
	// copied into the container's root before its volumes are mounted.
	ImageFiles map[string]string `json:"imageFiles,omitempty"`
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
		// Also at its host path, for command lines written with it (a
		// test running bin/etcdctl-vX.Y.Z in a busybox Pod); a volume may
		// hide that one.
		for _, at := range []string{containerBinDir, spec.BinDir} {
			if err := bindMount(spec.BinDir, filepath.Join(root, at), true); err != nil {
				return err
			}
		}
	}
	if err := linkImageBinaries(filepath.Join(root, imageBinDir), spec.ImageBinaries); err != nil {
		return err
	}
	files, err := layerOverHost(root, spec.ImageFiles, binPaths(spec.BinDir))
	if err != nil {
		return err
	}
	for target, source := range files {
		if err := copyTree(source, filepath.Join(root, target)); err != nil {
			return fmt.Errorf("copying the image's %s: %w", target, err)
		}
	}
	for _, m := range spec.Mounts {
		if err := bindMount(m.Source, filepath.Join(root, m.Target), m.ReadOnly); err != nil {
			return err
		}
	}
	return nil
}

// imageLayersDir is where, in the container's root, the image's files that
// lie in the host's directories are linked before they are laid over them.
const imageLayersDir = "/localcluster-image-layers"

// layerOverHost puts the image's files that lie in a directory bound from
// the host (OLM's /bin/cpb, which its bundle unpack Jobs copy by path)
// over that directory: it becomes a read-only overlay of a directory
// holding a link to each file (in the binaries' directory, at the path the
// container sees) over the host's. It returns the other files.
func layerOverHost(root string, files map[string]string, bins binPaths) (map[string]string, error) {
	rest := map[string]string{}
	layers := map[string]bool{}
	for target, source := range files {
		dir, err := filepath.EvalSymlinks(filepath.Dir(target))
		if err != nil || !underHostDir(dir) {
			rest[target] = source
			continue
		}
		layer := filepath.Join(root, imageLayersDir, dir)
		if err := os.MkdirAll(layer, 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink(bins.path(source), filepath.Join(layer, filepath.Base(target))); err != nil {
			return nil, fmt.Errorf("laying the image's %s over the host's %s: %w", target, dir, err)
		}
		layers[dir] = true
	}
	for dir := range layers {
		opts := "lowerdir=" + filepath.Join(root, imageLayersDir, dir) + ":" + dir
		if err := unix.Mount("overlay", filepath.Join(root, dir), "overlay", unix.MS_RDONLY, opts); err != nil {
			return nil, fmt.Errorf("laying the image's files over the host's %s: %w", dir, err)
		}
	}
	return rest, nil
}

// underHostDir reports whether dir (no symlinks) lies in one of hostDirs.
func underHostDir(dir string) bool {
	for _, h := range hostDirs {
		if dir == h || strings.HasPrefix(dir, h+"/") {
			return true
		}
	}
	return false
}

// copyTree copies the file or directory tree at source to target, with
// its modes; symbolic links are copied as links.
func copyTree(source, target string) error {
	return filepath.WalkDir(source, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(source, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(target, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, info.Mode().Perm())
		case info.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, dst)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, info.Mode().Perm())
		}
		return fmt.Errorf("%s is neither a file, a directory nor a link", p)
	})
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
