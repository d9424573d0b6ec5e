// Package olm checks the OLM packaging with the real tools: the bundle with
// `operator-sdk bundle validate`, the catalog with `opm validate` and our
// graph lint, on the repository's bundle/ and catalog/ and on broken copies
// of them, and the next release made with `make bundle catalog` in a copy
// of the repository. The tools are the ones the Makefile builds into bin/;
// `make test` passes their paths in OPERATOR_SDK_BIN, OPM_BIN and
// KUSTOMIZE_BIN.
package olm

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/etcd-operator/etcd-operator/internal/catalog"
	"github.com/etcd-operator/etcd-operator/test/support"
)

// root is the repository, as an absolute path: operator-sdk takes a
// relative path that does not start with ./ for an image.
var root = func() string {
	p, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return p
}()

// tool returns the path of a tool binary from its environment variable, or
// skips the test when the variable is unset.
func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Skipf("%s is not set: run the tests with `make test`, which builds the pinned tools into bin/ and passes their paths", env)
	}
	return p
}

// makeVar reads the default of a `NAME ?= value` variable of a Makefile.
func makeVar(t *testing.T, makefile, name string) string {
	t.Helper()
	data, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), name+" ?= "); ok {
			return strings.TrimSpace(value)
		}
	}
	t.Fatalf("%s sets no %s", makefile, name)
	return ""
}

// run runs a command in dir and returns its combined output and whether it
// succeeded.
func run(t *testing.T, dir string, argv ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		return string(out), false
	}
	return string(out), true
}

// validateBundle runs operator-sdk bundle validate as `make bundle` does.
func validateBundle(t *testing.T, bundleDir string) (string, bool) {
	t.Helper()
	sdk := tool(t, "OPERATOR_SDK_BIN")
	k8s := makeVar(t, filepath.Join(root, "Makefile"), "KUBE_TARGET_VERSION")
	return run(t, root, sdk, "bundle", "validate", bundleDir,
		"--select-optional", "suite=operatorframework", "--optional-values=k8s-version="+k8s)
}

func TestBundleIsValid(t *testing.T) {
	t.Parallel()
	if out, ok := validateBundle(t, filepath.Join(root, "bundle")); !ok {
		t.Fatalf("bundle/ does not validate:\n%s", out)
	}
}

// TestBundleLeavesCertManagerToTheUser: the bundle neither requires
// cert-manager's CRDs nor depends on its package. OLM resolves both in the
// Subscription's namespace only (CSVs copied into it do not count), so
// either would make OLM install a second cert-manager beside one the user
// runs in another namespace (OwnNamespace mode, or an operator namespace
// of its own), two controllers issuing the same certificates. The CSV's
// description says to install cert-manager first.
func TestBundleLeavesCertManagerToTheUser(t *testing.T) {
	t.Parallel()
	var csv struct {
		Spec struct {
			Description               string
			CustomResourceDefinitions struct {
				Required []struct{ Name, Version, Kind string }
			} `json:"customresourcedefinitions"`
		}
	}
	data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", "etcd-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatal(err)
	}
	if required := csv.Spec.CustomResourceDefinitions.Required; len(required) > 0 {
		t.Errorf("the CSV requires %+v: OLM would install their owner into the Subscription's namespace", required)
	}
	if !strings.Contains(csv.Spec.Description, "Install cert-manager first") {
		t.Errorf("the CSV's description does not tell the user to install cert-manager first:\n%s", csv.Spec.Description)
	}
	if _, err := os.Stat(filepath.Join(root, "bundle", "metadata", "dependencies.yaml")); !os.IsNotExist(err) {
		t.Errorf("bundle/metadata/dependencies.yaml exists (%v): OLM would install its packages into the Subscription's namespace", err)
	}
}

// TestBundleWithoutItsOwnedCRD: a bundle whose CSV owns a CRD the bundle
// does not carry is refused.
func TestBundleWithoutItsOwnedCRD(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	support.CopyFromRepo(t, root, dir, "bundle")
	crd := filepath.Join(dir, "bundle", "manifests", "etcd.aenix.io_etcdclusters.yaml")
	if err := os.Remove(crd); err != nil {
		t.Fatal(err)
	}
	out, ok := validateBundle(t, filepath.Join(dir, "bundle"))
	if ok {
		t.Fatalf("operator-sdk bundle validate accepted a bundle without the EtcdCluster CRD:\n%s", out)
	}
	// The message is quoted in operator-sdk's log line.
	for _, want := range []string{"owned CRD", "etcd.aenix.io/v1alpha1, Kind=EtcdCluster", "not found in bundle"} {
		if !strings.Contains(out, want) {
			t.Errorf("operator-sdk bundle validate failed without saying %q:\n%s", want, out)
		}
	}
}

func TestCatalogIsValid(t *testing.T) {
	t.Parallel()
	opm := tool(t, "OPM_BIN")
	if out, ok := run(t, root, opm, "validate", "catalog"); !ok {
		t.Fatalf("opm validate catalog:\n%s", out)
	}
	c, err := catalog.Load(filepath.Join(root, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	if problems := catalog.Lint(c); len(problems) > 0 {
		t.Fatalf("catalog/ fails the graph lint: %v", problems)
	}
	version := makeVar(t, filepath.Join(root, "Makefile"), "VERSION")
	channel := makeVar(t, filepath.Join(root, "Makefile"), "DEFAULT_CHANNEL")
	if heads := headsOf(t, c, channel); !slices.Equal(heads, []string{"etcd-operator.v" + version}) {
		t.Errorf("the head of channel %s is %v, want VERSION %s: run make catalog", channel, heads, version)
	}
}

// TestBrokenGraphs: two heads and a replaces cycle are refused by opm
// validate and by our lint; an invalid skipRange only by our lint, which is
// why we have one.
func TestBrokenGraphs(t *testing.T) {
	t.Parallel()
	opm := tool(t, "OPM_BIN")
	tests := []struct {
		name       string
		channel    string
		opmRefuses bool
		want       string // what our lint says
	}{
		{
			name: "two heads",
			channel: `- name: etcd-operator.v0.1.0
- name: etcd-operator.v0.2.0
  replaces: etcd-operator.v0.1.0
- name: etcd-operator.v0.3.0
  replaces: etcd-operator.v0.1.0`,
			opmRefuses: true,
			want:       "2 heads etcd-operator.v0.2.0, etcd-operator.v0.3.0",
		},
		{
			name: "a cycle",
			channel: `- name: etcd-operator.v0.1.0
  replaces: etcd-operator.v0.2.0
- name: etcd-operator.v0.2.0
  replaces: etcd-operator.v0.1.0
- name: etcd-operator.v0.3.0
  replaces: etcd-operator.v0.2.0`,
			opmRefuses: true,
			want:       "replaces cycle etcd-operator.v0.1.0 -> etcd-operator.v0.2.0 -> etcd-operator.v0.1.0",
		},
		{
			name: "an invalid skipRange",
			channel: `- name: etcd-operator.v0.1.0
- name: etcd-operator.v0.2.0
  replaces: etcd-operator.v0.1.0
- name: etcd-operator.v0.3.0
  replaces: etcd-operator.v0.2.0
  skipRange: '>=0.0.0 <<0.3.0'`,
			want: `etcd-operator.v0.3.0 has skipRange ">=0.0.0 <<0.3.0", which is not a semver range`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := brokenCatalog(t, tt.channel)
			out, ok := run(t, dir, opm, "validate", ".")
			if ok == tt.opmRefuses {
				t.Errorf("opm validate succeeded=%v, want %v:\n%s", ok, !tt.opmRefuses, out)
			}
			c, err := catalog.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			problems := catalog.Lint(c)
			if !slices.ContainsFunc(problems, func(err error) bool { return strings.Contains(err.Error(), tt.want) }) {
				t.Errorf("our lint reported %v, want a problem containing %q", problems, tt.want)
			}
		})
	}
}

// brokenCatalog writes a catalog of versions 0.1.0, 0.2.0 and 0.3.0 (copies
// of the repository's bundle for VERSION) with one alpha channel of the
// given entries.
func brokenCatalog(t *testing.T, entries string) string {
	t.Helper()
	version := makeVar(t, filepath.Join(root, "Makefile"), "VERSION")
	doc, err := os.ReadFile(filepath.Join(root, "catalog", "etcd-operator", "bundles", "etcd-operator.v"+version+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"package.yaml":  "schema: olm.package\nname: etcd-operator\ndefaultChannel: alpha\n",
		"channels.yaml": "schema: olm.channel\npackage: etcd-operator\nname: alpha\nentries:\n" + entries + "\n",
	}
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0"} {
		files["bundle-"+v+".yaml"] = strings.ReplaceAll(string(doc), version, v)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNextRelease makes the next release in a copy of the repository as a
// maintainer would (`make bundle catalog VERSION=<next>`) and checks that
// the bundle and the channel head move to it, that it replaces the previous
// head and skips every earlier version, that the released bundles stay as
// they were, and that running it again changes nothing.
func TestNextRelease(t *testing.T) {
	t.Parallel()
	sdk, opm := tool(t, "OPERATOR_SDK_BIN"), tool(t, "OPM_BIN")
	kustomize := tool(t, "KUSTOMIZE_BIN")
	dir := t.TempDir()
	// What `make bundle catalog` reads: the API for the CSV's descriptors,
	// config/, the bundle and catalog to update, and the catalog tool.
	support.CopyFromRepo(t, root, dir, "Makefile", "PROJECT", "go.mod", "go.sum", "api", "config", "bundle", "bundle.Dockerfile",
		"catalog", "catalog.Dockerfile", "hack/pin-created-at.sh", "hack/catalog", "internal/catalog")

	makefile := filepath.Join(dir, "Makefile")
	current := semver.MustParse(makeVar(t, makefile, "VERSION"))
	next := semver.Version{Major: current.Major, Minor: current.Minor + 1}
	channel := makeVar(t, makefile, "DEFAULT_CHANNEL")
	before, err := catalog.Load(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	previousHead := headsOf(t, before, channel)
	if len(previousHead) != 1 {
		t.Fatalf("channel %s has heads %v before the release", channel, previousHead)
	}

	release := func() {
		t.Helper()
		// The tools are the repository's; controller-gen is not run (the
		// copy's config/ is already generated) and no tool is rebuilt.
		cmd := exec.Command("make", "--no-print-directory", "bundle", "catalog", "VERSION="+next.String(),
			"OPERATOR_SDK="+sdk, "OPM="+opm, "KUSTOMIZE="+kustomize,
			"-o", "manifests", "-o", sdk, "-o", opm, "-o", kustomize)
		cmd.Dir = dir
		cmd.Env = support.WithoutMakeFlags(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	release()

	csv, err := os.ReadFile(filepath.Join(dir, "bundle", "manifests", "etcd-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name := "etcd-operator.v" + next.String()
	if !strings.Contains(string(csv), "\n  name: "+name+"\n") {
		t.Errorf("the bundle's CSV is not %s", name)
	}
	after, err := catalog.Load(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	if problems := catalog.Lint(after); len(problems) > 0 {
		t.Fatalf("the released catalog fails the graph lint: %v", problems)
	}
	if heads := headsOf(t, after, channel); !slices.Equal(heads, []string{name}) {
		t.Errorf("channel %s heads = %v, want [%s]", channel, heads, name)
	}
	want := catalog.ChannelEntry{Name: name, Replaces: previousHead[0], SkipRange: ">=0.0.0 <" + next.String()}
	if e := entryOf(after, channel, name); e == nil || e.Name != want.Name || e.Replaces != want.Replaces || e.SkipRange != want.SkipRange || len(e.Skips) > 0 {
		t.Errorf("channel %s entry of %s = %+v, want %+v", channel, name, e, want)
	}
	for _, b := range before.Bundles {
		i := slices.IndexFunc(after.Bundles, func(a catalog.Bundle) bool { return a.Name == b.Name })
		if i < 0 || !bytes.Equal(after.Bundles[i].Doc, b.Doc) {
			t.Errorf("the released bundle %s changed", b.Name)
		}
	}
	image := struct {
		Image string `json:"image"`
	}{}
	for _, b := range after.Bundles {
		if b.Name == name {
			if err := yaml.Unmarshal(b.Doc, &image); err != nil {
				t.Fatal(err)
			}
		}
	}
	if wantImage := "ghcr.io/etcd-operator/etcd-operator-bundle:v" + next.String(); image.Image != wantImage {
		t.Errorf("the new bundle's image = %q, want %q", image.Image, wantImage)
	}

	// Idempotent: the same release again gives the same files.
	first := snapshot(t, dir, "catalog", "catalog.Dockerfile", "bundle")
	release()
	if second := snapshot(t, dir, "catalog", "catalog.Dockerfile", "bundle"); !maps.Equal(first, second) {
		t.Errorf("make bundle catalog run twice changed catalog/ or bundle/")
	}
}

func headsOf(t *testing.T, c catalog.Catalog, channel string) []string {
	t.Helper()
	for _, ch := range c.Channels {
		if ch.Name == channel {
			return catalog.Heads(ch)
		}
	}
	t.Fatalf("the catalog has no channel %s", channel)
	return nil
}

func entryOf(c catalog.Catalog, channel, name string) *catalog.ChannelEntry {
	for _, ch := range c.Channels {
		if ch.Name != channel {
			continue
		}
		for i := range ch.Entries {
			if ch.Entries[i].Name == name {
				return &ch.Entries[i]
			}
		}
	}
	return nil
}

// snapshot reads every file under the given paths of dir.
func snapshot(t *testing.T, dir string, paths ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(dir, p), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			files[path] = string(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}
