// Package images maps the container images of the local cluster's pods to
// binaries built on this machine: there is no container runtime and no
// registry, so a container runs as a host process of one of these binaries,
// or, for general-purpose images (busybox, alpine, debian, ubuntu), of the
// host's own commands.
package images

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Image is what an image reference runs as on the host.
type Image struct {
	// Ref is the image reference as written in the pod.
	Ref string
	// Binaries maps a command name (a basename: "etcd") to the absolute host
	// path that runs it ("/repo/bin/etcd-v3.6.16").
	Binaries map[string]string
	// Entrypoint is the image's ENTRYPOINT as host paths and args: what runs,
	// followed by the container's args, when the container has no command.
	Entrypoint []string
	// Cmd is the image's CMD as host paths and args: the args when the
	// container has neither command nor args (the whole command line when
	// Entrypoint is empty).
	Cmd []string
	// HostCommands is true for general-purpose images (busybox, alpine,
	// debian, ubuntu) whose commands (sh, sleep, cat...) are looked up in the
	// host's PATH.
	HostCommands bool
	// Files are the image's own files (a directory image's), container
	// path to host path: each container gets its own copy, as a runtime
	// gives it a writable layer over the image; its volumes are mounted
	// over them.
	Files map[string]string

	// path is the PATH searched for HostCommands; empty means the process's
	// $PATH.
	path string
}

// Argv returns the argv of a container of the image, from its command and
// args as podenv.CommandLine returns them, following the runtime's rules:
//
//   - with a command: command, then args;
//   - without one: Entrypoint, then args, or Cmd when args is empty too;
//   - when that is empty (no Entrypoint, no Cmd, no args) it is an error.
//
// A command (or, without Entrypoint, the first arg) is a name in the
// container. An absolute path in one of volumes, the paths at which the
// container's volumes are mounted, is a file of that volume and runs as
// is, at its path in the container (a program an init container copied
// there, say), as a runtime runs it. Any other name is resolved by
// basename through Binaries, so "etcd" and "/usr/local/bin/etcd" both run
// the etcd binary, and for HostCommands images through the host's PATH. A
// name it cannot resolve is an error that names it and the image.
// Entrypoint and Cmd are host paths already. Host paths run as they are in
// the container too: its root has the host's programs and the binaries'
// directory at their host paths.
func (i Image) Argv(command, args, volumes []string) ([]string, error) {
	if len(command) > 0 {
		exe, err := i.lookup(command[0], volumes)
		if err != nil {
			return nil, err
		}
		return concat([]string{exe}, command[1:], args), nil
	}
	if len(i.Entrypoint) > 0 {
		if len(args) == 0 {
			return concat(i.Entrypoint, i.Cmd), nil
		}
		return concat(i.Entrypoint, args), nil
	}
	if len(args) == 0 {
		if len(i.Cmd) == 0 {
			return nil, fmt.Errorf("image %q has no default command in the local cluster: give the container a command", i.Ref)
		}
		return concat(i.Cmd), nil
	}
	exe, err := i.lookup(args[0], volumes)
	if err != nil {
		return nil, err
	}
	return concat([]string{exe}, args[1:]), nil
}

// lookup returns the path that runs command name of a container of the
// image whose volumes are mounted at volumes: name itself when it lies in
// one of them, else a host path.
func (i Image) lookup(name string, volumes []string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty command name for image %q", i.Ref)
	}
	if inVolume(name, volumes) {
		return name, nil
	}
	// An absolute path could have been a file of a volume: say it is in
	// none.
	notInVolume := ""
	if path.IsAbs(name) {
		notInVolume = ", nor in a volume of the container"
	}
	base := path.Base(name)
	if p, ok := i.Binaries[base]; ok {
		return p, nil
	}
	if i.HostCommands {
		if p, ok := lookPath(base, i.path); ok {
			return p, nil
		}
		return "", fmt.Errorf("command %q of image %q is not in the host's PATH%s", name, i.Ref, notInVolume)
	}
	return "", fmt.Errorf("command %q is not in image %q, which has %s in the local cluster%s", name, i.Ref, i.commands(), notInVolume)
}

// inVolume reports whether name is an absolute path at or below one of
// volumes (mount paths in the container), after cleaning: a file mounted
// by subPath is at its mount path.
func inVolume(name string, volumes []string) bool {
	if !path.IsAbs(name) {
		return false
	}
	name = path.Clean(name)
	for _, v := range volumes {
		if !path.IsAbs(v) {
			continue
		}
		v = path.Clean(v)
		if name == v || strings.HasPrefix(name, strings.TrimSuffix(v, "/")+"/") {
			return true
		}
	}
	return false
}

// commands lists the command names of the image for an error message.
func (i Image) commands() string {
	names := make([]string, 0, len(i.Binaries))
	for name := range i.Binaries {
		names = append(names, name)
	}
	if len(names) == 0 {
		return "no commands"
	}
	slices.Sort(names)
	return "only " + strings.Join(names, ", ")
}

// lookPath returns the executable file name in the directories of list (a
// PATH, the process's $PATH when empty); relative directories are skipped.
func lookPath(name, list string) (string, bool) {
	if list == "" {
		list = os.Getenv("PATH")
	}
	if name == "" || name == "." || name == "/" || strings.ContainsRune(name, '/') {
		return "", false
	}
	for _, dir := range filepath.SplitList(list) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

// isExecutable reports whether p is a regular file (after symlinks) that
// someone may execute.
func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// isFile reports whether p is a regular file (after symlinks).
func isFile(p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	return fi.Mode().IsRegular()
}

// concat returns the lists joined in a new slice.
func concat(lists ...[]string) []string {
	return slices.Concat(lists...)
}
