package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// DirectoryImagesDir is where, under binDir, the local cluster keeps the
// images made of files (the catalog image, the bundle image): image REPO:TAG
// is the directory images/REPO/TAG, with REPO normalised
// (images/ghcr.io/etcd-operator/etcd-operator-catalog/v0.1.0).
const DirectoryImagesDir = "images"

// DirectoryImageConfig is image.json of a directory image: the image it is
// built FROM (scratch for none), whose commands it has, and its ENTRYPOINT and CMD as in its
// Dockerfile (container paths, resolved through FROM's commands). Its files
// are those of the directory rootfs/, at the same paths in the container.
type DirectoryImageConfig struct {
	From       string   `json:"from"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// reservedTops are the top-level directories of a container's root that the
// local cluster binds from the host (its programs and libraries, /etc,
// /dev, /proc, /sys): a directory image cannot put files there.
var reservedTops = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys"}

// directoryImage returns the Image of the directory image at dir, for
// reference r, and whether there is one.
func (t *Table) directoryImage(r reference) (Image, bool, error) {
	if r.tag == "" {
		return Image{}, false, nil
	}
	dir := filepath.Join(t.binDir, DirectoryImagesDir, filepath.FromSlash(r.repo), r.tag)
	data, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if errors.Is(err, os.ErrNotExist) {
		return Image{}, false, nil
	}
	if err != nil {
		return Image{}, true, err
	}
	var cfg DirectoryImageConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return Image{}, true, fmt.Errorf("reading %s: %w", filepath.Join(dir, "image.json"), err)
	}
	if cfg.From == "" {
		return Image{}, true, fmt.Errorf("%s names no image to build from (from)", filepath.Join(dir, "image.json"))
	}
	base, err := t.base(cfg.From)
	if err != nil {
		return Image{}, true, err
	}
	img := Image{Binaries: base.Binaries, HostCommands: base.HostCommands, Entrypoint: base.Entrypoint, Cmd: base.Cmd, path: base.path}
	// A Dockerfile's ENTRYPOINT resets the CMD it inherits.
	if cfg.Entrypoint != nil {
		if img.Entrypoint, err = img.hostArgv(cfg.Entrypoint); err != nil {
			return Image{}, true, err
		}
		img.Cmd = nil
	}
	if cfg.Cmd != nil {
		img.Cmd = cfg.Cmd
		if len(img.Entrypoint) == 0 {
			if img.Cmd, err = img.hostArgv(cfg.Cmd); err != nil {
				return Image{}, true, err
			}
		}
	}
	if img.Files, err = rootFiles(filepath.Join(dir, "rootfs")); err != nil {
		return Image{}, true, err
	}
	return img, true, nil
}

// base returns the Image a directory image is built from: none for
// scratch, as in a Dockerfile.
func (t *Table) base(from string) (Image, error) {
	if from == "scratch" {
		return Image{}, nil
	}
	r, err := parse(from)
	if err != nil {
		return Image{}, fmt.Errorf("the image it is built from, %q: %w", from, err)
	}
	if _, ok, _ := t.directoryImage(r); ok {
		return Image{}, fmt.Errorf("it is built from %s, another directory image: the local cluster stacks none", from)
	}
	img, err := t.resolve(from, r)
	if err != nil {
		return Image{}, fmt.Errorf("the image it is built from: %w", err)
	}
	return img, nil
}

// hostArgv returns argv with its command resolved to the host path that
// runs it in the image.
func (i Image) hostArgv(argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	exe, err := i.lookup(argv[0], nil)
	if err != nil {
		return nil, err
	}
	return concat([]string{exe}, argv[1:]), nil
}

// rootFiles returns the top-level entries of rootfs as container paths to
// host paths.
func rootFiles(rootfs string) (map[string]string, error) {
	entries, err := os.ReadDir(rootfs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(entries))
	for _, e := range entries {
		if slices.Contains(reservedTops, e.Name()) {
			return nil, fmt.Errorf("%s: the local cluster cannot put an image's files in /%s, which it binds from the host", filepath.Join(rootfs, e.Name()), e.Name())
		}
		files[path.Join("/", e.Name())] = filepath.Join(rootfs, e.Name())
	}
	return files, nil
}
