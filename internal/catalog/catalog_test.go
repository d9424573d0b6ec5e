package catalog

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// bundleDoc is an olm.bundle document as opm renders it, reduced to what
// the catalog reads.
func bundleDoc(pkg, version string) string {
	return fmt.Sprintf(`image: ghcr.io/etcd-operator/etcd-operator-bundle:v%[2]s
name: %[1]s.v%[2]s
package: %[1]s
properties:
- type: olm.package
  value:
    packageName: %[1]s
    version: %[2]s
schema: olm.bundle
`, pkg, version)
}

// newBundle is a bundle of package etcd-operator.
func newBundle(t *testing.T, version string) Bundle {
	t.Helper()
	b, err := ParseBundle([]byte(bundleDoc("etcd-operator", version)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// name is the bundle name of a version.
func name(version string) string { return "etcd-operator.v" + version }

// entry is a channel entry of version v replacing version replaces ("" for
// none) with skipRange.
func entry(v, replaces, skipRange string) ChannelEntry {
	e := ChannelEntry{Name: name(v), SkipRange: skipRange}
	if replaces != "" {
		e.Replaces = name(replaces)
	}
	return e
}

// catalogBuilder builds test catalogs: newCatalog(t, "0.1.0", "0.2.0").
// WithChannel("alpha", entries...).Obj().
type catalogBuilder struct {
	c Catalog
	t *testing.T
}

func newCatalog(t *testing.T, versions ...string) *catalogBuilder {
	b := &catalogBuilder{t: t, c: Catalog{Package: &Package{Schema: SchemaPackage, Name: "etcd-operator", DefaultChannel: "alpha"}}}
	for _, v := range versions {
		b.c.Bundles = append(b.c.Bundles, newBundle(t, v))
	}
	return b
}

func (b *catalogBuilder) WithChannel(name string, entries ...ChannelEntry) *catalogBuilder {
	b.c.Channels = append(b.c.Channels, Channel{Schema: SchemaChannel, Package: "etcd-operator", Name: name, Entries: entries})
	return b
}

func (b *catalogBuilder) WithDefaultChannel(name string) *catalogBuilder {
	b.c.Package.DefaultChannel = name
	return b
}

func (b *catalogBuilder) Obj() Catalog { return b.c }

// good is a three-release channel as make catalog writes it.
func good(t *testing.T) *catalogBuilder {
	return newCatalog(t, "0.1.0", "0.2.0", "0.3.0").WithChannel("alpha",
		entry("0.1.0", "", ">=0.0.0 <0.1.0"),
		entry("0.2.0", "0.1.0", ">=0.0.0 <0.2.0"),
		entry("0.3.0", "0.2.0", ">=0.0.0 <0.3.0"),
	)
}

func TestLint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		catalog Catalog
		want    []string // one substring per expected problem; nil: none
	}{
		{name: "good", catalog: good(t).Obj()},
		{name: "good, two channels", catalog: good(t).WithChannel("stable", entry("0.3.0", "", ">=0.0.0 <0.3.0")).Obj()},
		{
			name: "skips make an edge",
			catalog: newCatalog(t, "0.1.0", "0.2.0", "0.3.0").WithChannel("alpha",
				entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", ""),
				ChannelEntry{Name: name("0.3.0"), Replaces: name("0.1.0"), Skips: []string{name("0.2.0")}}).Obj(),
		},
		{
			name: "two heads",
			catalog: newCatalog(t, "0.1.0", "0.2.0", "0.3.0").WithChannel("alpha",
				entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", ""), entry("0.3.0", "0.1.0", "")).Obj(),
			want: []string{`channel "alpha": 2 heads etcd-operator.v0.2.0, etcd-operator.v0.3.0: exactly one entry may be left unreplaced`},
		},
		{
			name: "a cycle",
			catalog: newCatalog(t, "0.1.0", "0.2.0", "0.3.0").WithChannel("alpha",
				entry("0.1.0", "0.2.0", ""), entry("0.2.0", "0.1.0", ""), entry("0.3.0", "0.2.0", "")).Obj(),
			want: []string{
				`channel "alpha": etcd-operator.v0.1.0 replaces etcd-operator.v0.2.0, which is not older`,
				`channel "alpha": replaces cycle etcd-operator.v0.1.0 -> etcd-operator.v0.2.0 -> etcd-operator.v0.1.0`,
			},
		},
		{
			name: "a cycle through every entry leaves no head",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.1.0", "0.2.0", ""), entry("0.2.0", "0.1.0", "")).Obj(),
			want: []string{
				"which is not older",
				`channel "alpha": no head`,
				"replaces cycle etcd-operator.v0.1.0 -> etcd-operator.v0.2.0 -> etcd-operator.v0.1.0",
			},
		},
		{
			name:    "an entry replacing itself",
			catalog: newCatalog(t, "0.1.0").WithChannel("alpha", entry("0.1.0", "0.1.0", "")).Obj(),
			want:    []string{"which is not older", "no head", "replaces cycle etcd-operator.v0.1.0 -> etcd-operator.v0.1.0"},
		},
		{
			name: "an invalid skipRange",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", ">=0.0.0 <<0.2.0")).Obj(),
			want: []string{`channel "alpha": etcd-operator.v0.2.0 has skipRange ">=0.0.0 <<0.2.0", which is not a semver range`},
		},
		{
			name: "a skipRange that is not a range at all",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", "all of them")).Obj(),
			want: []string{`has skipRange "all of them", which is not a semver range`},
		},
		{
			name: "a skipRange that includes its own version",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", ">=0.0.0 <=0.2.0")).Obj(),
			want: []string{"which includes its own version 0.2.0"},
		},
		{
			name: "replaces a bundle not in the channel",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.2.0", "0.1.0", "")).WithChannel("stable", entry("0.1.0", "", "")).Obj(),
			want: []string{`channel "alpha": etcd-operator.v0.2.0 replaces etcd-operator.v0.1.0, which is not in the channel`},
		},
		{
			name: "replaces a newer version",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
				entry("0.2.0", "", ""), entry("0.1.0", "0.2.0", "")).Obj(),
			want: []string{"etcd-operator.v0.1.0 replaces etcd-operator.v0.2.0, which is not older"},
		},
		{
			name:    "an entry that is no bundle",
			catalog: newCatalog(t, "0.1.0").WithChannel("alpha", entry("0.1.0", "", ""), entry("0.2.0", "0.1.0", "")).Obj(),
			want:    []string{`channel "alpha": etcd-operator.v0.2.0 is not a bundle of the catalog`},
		},
		{
			name:    "a bundle in no channel",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha", entry("0.1.0", "", "")).Obj(),
			want:    []string{"bundle etcd-operator.v0.2.0 is in no channel"},
		},
		{
			name:    "an entry listed twice",
			catalog: newCatalog(t, "0.1.0").WithChannel("alpha", entry("0.1.0", "", ""), entry("0.1.0", "", "")).Obj(),
			want:    []string{"etcd-operator.v0.1.0 is listed twice"},
		},
		{
			name:    "an empty channel",
			catalog: good(t).WithChannel("stable").Obj(),
			want:    []string{`channel "stable": no entries`},
		},
		{
			name:    "a default channel that does not exist",
			catalog: good(t).WithDefaultChannel("stable").Obj(),
			want:    []string{`its defaultChannel "stable" is not a channel`},
		},
		{
			name:    "no package",
			catalog: Catalog{},
			want:    []string{"no olm.package"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			problems := Lint(tt.catalog)
			if len(problems) != len(tt.want) {
				t.Fatalf("Lint reported %d problems, want %d:\n%v", len(problems), len(tt.want), errors.Join(problems...))
			}
			for i, want := range tt.want {
				if !strings.Contains(problems[i].Error(), want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], want)
				}
			}
		})
	}
}

func TestHeads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []ChannelEntry
		want    []string
	}{
		{"one entry", []ChannelEntry{entry("0.1.0", "", "")}, []string{name("0.1.0")}},
		{"a chain", good(t).Obj().Channels[0].Entries, []string{name("0.3.0")}},
		{"a replaces target outside the channel is no edge", []ChannelEntry{entry("0.2.0", "0.1.0", "")}, []string{name("0.2.0")}},
		{"a skipRange is no edge", []ChannelEntry{entry("0.1.0", "", ""), entry("0.2.0", "", ">=0.0.0 <0.2.0")}, []string{name("0.1.0"), name("0.2.0")}},
		{"skips are edges", []ChannelEntry{entry("0.1.0", "", ""), {Name: name("0.2.0"), Skips: []string{name("0.1.0")}}}, []string{name("0.2.0")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Heads(Channel{Name: "alpha", Entries: tt.entries}); !slices.Equal(got, tt.want) {
				t.Errorf("Heads = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	t.Parallel()
	empty := Catalog{}
	first := Catalog{
		Package:  &Package{Schema: SchemaPackage, Name: "etcd-operator", DefaultChannel: "alpha"},
		Channels: []Channel{{Schema: SchemaChannel, Package: "etcd-operator", Name: "alpha", Entries: []ChannelEntry{entry("0.1.0", "", ">=0.0.0 <0.1.0")}}},
		Bundles:  []Bundle{newBundle(t, "0.1.0")},
	}
	second := newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
		entry("0.1.0", "", ">=0.0.0 <0.1.0"),
		entry("0.2.0", "0.1.0", ">=0.0.0 <0.2.0"),
	).Obj()
	promoted := newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha",
		entry("0.1.0", "", ">=0.0.0 <0.1.0"),
		entry("0.2.0", "0.1.0", ">=0.0.0 <0.2.0"),
	).WithChannel("stable", entry("0.2.0", "", ">=0.0.0 <0.2.0")).WithDefaultChannel("stable").Obj()
	tests := []struct {
		name     string
		catalog  Catalog
		version  string
		channels []string
		defaults string
		want     Catalog
		wantErr  string
	}{
		{name: "the first release into an empty catalog", catalog: empty, version: "0.1.0", channels: []string{"alpha"}, defaults: "alpha", want: first},
		{name: "the next release replaces the head", catalog: first, version: "0.2.0", channels: []string{"alpha"}, defaults: "alpha", want: second},
		{name: "adding a release again changes nothing", catalog: second, version: "0.2.0", channels: []string{"alpha"}, defaults: "alpha", want: second},
		{name: "adding an earlier release again changes nothing", catalog: second, version: "0.1.0", channels: []string{"alpha"}, defaults: "alpha", want: second},
		{name: "a new channel starts at the release", catalog: second, version: "0.2.0", channels: []string{"alpha", "stable"}, defaults: "stable", want: promoted},
		{name: "an older version is refused", catalog: second, version: "0.1.5", channels: []string{"alpha"}, defaults: "alpha", wantErr: `channel "alpha": etcd-operator.v0.1.5 is not newer than the channel's head etcd-operator.v0.2.0`},
		{name: "a pre-release of the head is refused", catalog: second, version: "0.2.0-rc.1", channels: []string{"alpha"}, defaults: "alpha", wantErr: "is not newer"},
		{name: "a default channel the release does not create", catalog: second, version: "0.3.0", channels: []string{"alpha"}, defaults: "stable", wantErr: `the default channel "stable" is not one of the release's channels`},
		{name: "no channel", catalog: second, version: "0.3.0", defaults: "alpha", wantErr: "at least one channel"},
		{
			name:    "a broken graph is not extended",
			catalog: newCatalog(t, "0.1.0", "0.2.0").WithChannel("alpha", entry("0.1.0", "", ""), entry("0.2.0", "", "")).Obj(),
			version: "0.3.0", channels: []string{"alpha"}, defaults: "alpha",
			wantErr: `channel "alpha" has 2 heads`,
		},
		{
			name:    "a broken catalog is not written",
			catalog: newCatalog(t, "0.1.0").WithChannel("alpha", entry("0.1.0", "", "nope")).Obj(),
			version: "0.1.0", channels: []string{"alpha"}, defaults: "alpha",
			wantErr: `adding etcd-operator.v0.1.0 would break the catalog: channel "alpha": etcd-operator.v0.1.0 has skipRange "nope"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := clone(tt.catalog)
			got, err := Add(tt.catalog, Release{Bundle: newBundle(t, tt.version), Channels: tt.channels, DefaultChannel: tt.defaults})
			if !reflect.DeepEqual(tt.catalog, before) {
				t.Errorf("Add changed its input catalog")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Add error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Add gave\n%s\nwant\n%s", dump(t, got), dump(t, tt.want))
			}
		})
	}
}

// TestAddRefreshesTheBundle: adding a version that is in the catalog
// replaces its rendering, so the catalog follows bundle/ until the release.
func TestAddRefreshesTheBundle(t *testing.T) {
	t.Parallel()
	c := good(t).Obj()
	b := newBundle(t, "0.3.0")
	b.Doc = append(b.Doc, []byte("# rendered again\n")...)
	got, err := Add(c, Release{Bundle: b, Channels: []string{"alpha"}, DefaultChannel: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Bundles) != 3 || string(got.Bundles[2].Doc) != string(b.Doc) {
		t.Errorf("bundles after adding 0.3.0 again: %+v", got.Bundles)
	}
	if !reflect.DeepEqual(got.Channels, c.Channels) {
		t.Errorf("channels changed: %+v", got.Channels)
	}
}

func TestParseRendered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		out     string
		want    string // the bundle's name and version
		wantErr string
	}{
		{name: "one bundle", out: "---\n" + bundleDoc("etcd-operator", "0.2.0"), want: "etcd-operator.v0.2.0 0.2.0"},
		{name: "a pre-release", out: bundleDoc("etcd-operator", "1.0.0-rc.1"), want: "etcd-operator.v1.0.0-rc.1 1.0.0-rc.1"},
		{name: "nothing", out: "", wantErr: "gave 0 documents"},
		{name: "two bundles", out: bundleDoc("etcd-operator", "0.1.0") + "---\n" + bundleDoc("etcd-operator", "0.2.0"), wantErr: "gave 2 documents"},
		{name: "not a bundle", out: "schema: olm.package\nname: etcd-operator\n", wantErr: `gave a "olm.package"`},
		{name: "no version", out: "schema: olm.bundle\nname: a.v1\npackage: a\n", wantErr: "has no olm.package property"},
		{name: "a version that is not semver", out: strings.Replace(bundleDoc("etcd-operator", "0.2.0"), "version: 0.2.0", "version: v0.2", 1), wantErr: `version "v0.2" is not semver`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := ParseRendered([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRendered error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Name + " " + b.Version.String(); got != tt.want {
				t.Errorf("ParseRendered = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	pkg := "schema: olm.package\nname: etcd-operator\ndefaultChannel: alpha\n"
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"an unknown schema", map[string]string{"a.yaml": "schema: olm.deprecations\npackage: etcd-operator\n"}, `a.yaml: unexpected schema "olm.deprecations"`},
		{"an unknown channel field", map[string]string{"a.yaml": "schema: olm.channel\nname: alpha\npackage: p\nentries: []\nextra: 1\n"}, `a.yaml: error unmarshaling JSON`},
		{"two packages", map[string]string{"a.yaml": pkg, "b.yaml": pkg}, "b.yaml: a second olm.package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string][]byte{}
			for k, v := range tt.files {
				files[k] = []byte(v)
			}
			if _, err := Decode(files); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestWriteLoad: a catalog written and loaded again is the same catalog,
// laid out as package.yaml, channels.yaml and one file per bundle, and
// files of another layout are folded into it.
func TestWriteLoad(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	stray := filepath.Join(root, "etcd-operator", "old-index.yaml")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("# an earlier layout\n---\n"+bundleDoc("etcd-operator", "0.0.1")), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Add(c, Release{Bundle: newBundle(t, "0.1.0"), Channels: []string{"alpha"}, DefaultChannel: "alpha"})
	if err == nil || !strings.Contains(err.Error(), "bundle etcd-operator.v0.0.1 is in no channel") {
		t.Fatalf("adding to a catalog with a stray bundle: %v", err)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	want := good(t).WithChannel("stable", entry("0.3.0", "", ">=0.0.0 <0.3.0")).Obj()
	if err := os.WriteFile(stray, []byte(""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(root, want); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	wantFiles := []string{
		"etcd-operator/bundles/etcd-operator.v0.1.0.yaml",
		"etcd-operator/bundles/etcd-operator.v0.2.0.yaml",
		"etcd-operator/bundles/etcd-operator.v0.3.0.yaml",
		"etcd-operator/channels.yaml",
		"etcd-operator/package.yaml",
	}
	if !slices.Equal(files, wantFiles) {
		t.Errorf("files = %v, want %v", files, wantFiles)
	}
	got, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded\n%s\nwant\n%s", dump(t, got), dump(t, want))
	}
}

func clone(c Catalog) Catalog {
	out := Catalog{Bundles: slices.Clone(c.Bundles)}
	if c.Package != nil {
		p := *c.Package
		out.Package = &p
	}
	for _, ch := range c.Channels {
		ch.Entries = slices.Clone(ch.Entries)
		out.Channels = append(out.Channels, ch)
	}
	return out
}

// dump shows a catalog as its files.
func dump(t *testing.T, c Catalog) string {
	t.Helper()
	files, err := c.Files()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "# %s\n%s", k, files[k])
	}
	return b.String()
}
