// Command catalog maintains the file-based OLM catalog in catalog/ (see
// docs/olm.md); `make catalog` runs it.
//
//	catalog add --opm OPM --bundle DIR --image IMAGE --channels a,b --default-channel a CATALOG
//
// renders the bundle directory with opm (offline: no image is pulled; the
// bundle is recorded under IMAGE) and publishes it in the channels: it
// replaces each channel's head and skips every earlier version. Adding the
// same version again only refreshes its rendering.
//
//	catalog lint CATALOG
//
// checks the upgrade graph: one head per channel, no replaces cycles, every
// replaces target in the channel, every skipRange a semver range.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/etcd-operator/etcd-operator/internal/catalog"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: catalog add|lint [flags] CATALOG_DIR")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "add":
		err = add(os.Args[2:])
	case "lint":
		err = lint(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: use add or lint", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func add(args []string) error {
	fs := flag.NewFlagSet("add", flag.ExitOnError)
	opm := fs.String("opm", "opm", "the opm binary")
	bundleDir := fs.String("bundle", "bundle", "the bundle directory to render")
	image := fs.String("image", "", "the bundle image the catalog points at (BUNDLE_IMG)")
	channels := fs.String("channels", "alpha", "comma-separated channels to publish the bundle in (CHANNELS)")
	defaultChannel := fs.String("default-channel", "alpha", "the package's default channel (DEFAULT_CHANNEL)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 || *image == "" {
		return errors.New("usage: catalog add --image IMAGE [--opm OPM] [--bundle DIR] [--channels a,b] [--default-channel a] CATALOG_DIR")
	}
	root := fs.Arg(0)
	// The image reference template is the image itself: a bundle directory
	// carries none, and opm migrates bundle objects to olm.csv.metadata only
	// for bundles with an image.
	render := exec.Command(*opm, "render", *bundleDir, "--output", "yaml",
		"--alpha-image-ref-template", *image,
		"--migrate-level", "bundle-object-to-csv-metadata")
	var stderr bytes.Buffer
	render.Stderr = &stderr
	out, err := render.Output()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(render.Args, " "), err, stderr.String())
	}
	b, err := catalog.ParseRendered(out)
	if err != nil {
		return err
	}
	c, err := catalog.Load(root)
	if err != nil {
		return err
	}
	c, err = catalog.Add(c, catalog.Release{Bundle: b, Channels: strings.Split(*channels, ","), DefaultChannel: *defaultChannel})
	if err != nil {
		return err
	}
	return catalog.Write(root, c)
}

func lint(args []string) error {
	fs := flag.NewFlagSet("lint", flag.ExitOnError)
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: catalog lint CATALOG_DIR")
	}
	c, err := catalog.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	if problems := catalog.Lint(c); len(problems) > 0 {
		return fmt.Errorf("%s: the upgrade graph is broken:\n%w", fs.Arg(0), errors.Join(problems...))
	}
	fmt.Printf("%s: upgrade graph OK (%d channels, %d bundles)\n", fs.Arg(0), len(c.Channels), len(c.Bundles))
	return nil
}
