// Package catalog is the operator's file-based OLM catalog (catalog/): one
// olm.package, its olm.channels and the olm.bundles rendered by opm from
// bundle/. It adds a release to the upgrade graph and lints that graph for
// what `opm validate` leaves out. Everything here is pure except Load and
// Write, which only move bytes between the catalog's files and the model.
package catalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The schemas of the file-based catalog objects this package handles.
const (
	SchemaPackage = "olm.package"
	SchemaChannel = "olm.channel"
	SchemaBundle  = "olm.bundle"
)

// Package is the olm.package object.
type Package struct {
	Schema         string `json:"schema"`
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel"`
	Description    string `json:"description,omitempty"`
	Icon           *Icon  `json:"icon,omitempty"`
}

// Icon is a package's icon.
type Icon struct {
	Data      string `json:"base64data"`
	MediaType string `json:"mediatype"`
}

// Channel is an olm.channel object: its entries are the upgrade graph.
type Channel struct {
	Schema  string         `json:"schema"`
	Package string         `json:"package"`
	Name    string         `json:"name"`
	Entries []ChannelEntry `json:"entries"`
}

// ChannelEntry is one bundle of a channel and the edges into it: OLM
// upgrades to it from the bundle it replaces, from the bundles it skips and
// from any installed version in its skipRange.
type ChannelEntry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

// Bundle is an olm.bundle object as opm rendered it. Doc is kept byte for
// byte; the other fields are read from it.
type Bundle struct {
	Name    string
	Package string
	Version semver.Version
	Doc     []byte
}

// Catalog is the catalog of one package. Package is nil for an empty
// catalog.
type Catalog struct {
	Package  *Package
	Channels []Channel
	Bundles  []Bundle
}

// bundleHeader is what we read from an olm.bundle document.
type bundleHeader struct {
	Name       string `json:"name"`
	Package    string `json:"package"`
	Properties []struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"properties"`
}

// ParseBundle reads an olm.bundle document: its name, package and version
// (from its olm.package property).
func ParseBundle(doc []byte) (Bundle, error) {
	doc = bytes.TrimSpace(doc)
	var h bundleHeader
	if err := yaml.Unmarshal(doc, &h); err != nil {
		return Bundle{}, fmt.Errorf("reading an olm.bundle: %w", err)
	}
	if h.Name == "" || h.Package == "" {
		return Bundle{}, errors.New("an olm.bundle has no name or no package")
	}
	for _, p := range h.Properties {
		if p.Type != "olm.package" {
			continue
		}
		var pkg struct {
			PackageName string `json:"packageName"`
			Version     string `json:"version"`
		}
		if err := json.Unmarshal(p.Value, &pkg); err != nil {
			return Bundle{}, fmt.Errorf("bundle %s: reading its olm.package property: %w", h.Name, err)
		}
		v, err := semver.Parse(pkg.Version)
		if err != nil {
			return Bundle{}, fmt.Errorf("bundle %s: version %q is not semver: %w", h.Name, pkg.Version, err)
		}
		if pkg.PackageName != h.Package {
			return Bundle{}, fmt.Errorf("bundle %s: its olm.package property names package %q, not %q", h.Name, pkg.PackageName, h.Package)
		}
		return Bundle{Name: h.Name, Package: h.Package, Version: v, Doc: append(doc, '\n')}, nil
	}
	return Bundle{}, fmt.Errorf("bundle %s has no olm.package property (its version)", h.Name)
}

// ParseRendered reads the output of `opm render` of one bundle directory:
// exactly one olm.bundle.
func ParseRendered(out []byte) (Bundle, error) {
	docs, err := splitDocuments(out)
	if err != nil {
		return Bundle{}, err
	}
	if len(docs) != 1 {
		return Bundle{}, fmt.Errorf("opm render gave %d documents, want the one olm.bundle of the bundle directory", len(docs))
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := yaml.Unmarshal(docs[0], &head); err != nil {
		return Bundle{}, err
	}
	if head.Schema != SchemaBundle {
		return Bundle{}, fmt.Errorf("opm render gave a %q, want an %s", head.Schema, SchemaBundle)
	}
	return ParseBundle(docs[0])
}

// Decode builds the catalog from its files (path to content). Every YAML
// document is an olm.package, olm.channel or olm.bundle of one package;
// anything else is an error, so that nothing in catalog/ is silently dropped
// when the catalog is written back.
func Decode(files map[string][]byte) (Catalog, error) {
	var c Catalog
	for _, name := range sortedKeys(files) {
		docs, err := splitDocuments(files[name])
		if err != nil {
			return Catalog{}, fmt.Errorf("%s: %w", name, err)
		}
		for _, doc := range docs {
			if err := c.decodeDocument(doc); err != nil {
				return Catalog{}, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return c, nil
}

func (c *Catalog) decodeDocument(doc []byte) error {
	var head struct {
		Schema string `json:"schema"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.Schema {
	case SchemaPackage:
		var p Package
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return err
		}
		if c.Package != nil {
			return fmt.Errorf("a second olm.package (%s, after %s): the catalog holds one package", p.Name, c.Package.Name)
		}
		c.Package = &p
	case SchemaChannel:
		var ch Channel
		if err := yaml.UnmarshalStrict(doc, &ch); err != nil {
			return err
		}
		c.Channels = append(c.Channels, ch)
	case SchemaBundle:
		b, err := ParseBundle(doc)
		if err != nil {
			return err
		}
		c.Bundles = append(c.Bundles, b)
	default:
		return fmt.Errorf("unexpected schema %q: the catalog holds only %s, %s and %s objects", head.Schema, SchemaPackage, SchemaChannel, SchemaBundle)
	}
	return nil
}

// Files lays the catalog out as files under its package directory:
// <package>/package.yaml, <package>/channels.yaml (channels by name) and
// <package>/bundles/<bundle>.yaml (as opm rendered them).
func (c Catalog) Files() (map[string][]byte, error) {
	if c.Package == nil {
		return nil, errors.New("the catalog has no olm.package")
	}
	dir := c.Package.Name
	files := map[string][]byte{}
	pkg, err := yaml.Marshal(c.Package)
	if err != nil {
		return nil, err
	}
	files[path.Join(dir, "package.yaml")] = pkg
	channels := slices.Clone(c.Channels)
	slices.SortFunc(channels, func(a, b Channel) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	for i, ch := range channels {
		out, err := yaml.Marshal(ch)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(out)
	}
	files[path.Join(dir, "channels.yaml")] = buf.Bytes()
	for _, b := range c.Bundles {
		files[path.Join(dir, "bundles", b.Name+".yaml")] = b.Doc
	}
	return files, nil
}

// Release is a bundle to publish and the channels to publish it in.
type Release struct {
	Bundle         Bundle
	Channels       []string
	DefaultChannel string
}

// SkipRange is the skipRange of a release: every earlier version, so that
// OLM moves an installation of any older version (including one from a
// version no longer in the catalog, or from another channel) straight to
// this one.
func SkipRange(v semver.Version) string { return ">=0.0.0 <" + v.String() }

// Add publishes a release: the bundle is added (or, when its version is
// already in the catalog, replaced by the new rendering, so the catalog
// follows bundle/), and in each channel that does not list it yet it
// becomes the new head: it replaces the current head and skips every
// earlier version. The package's default channel is set. Adding a release
// twice gives the same catalog. Add refuses a version that is not newer
// than a channel's head, and returns an error rather than a catalog that
// fails Lint.
func Add(c Catalog, r Release) (Catalog, error) {
	b := r.Bundle
	if len(r.Channels) == 0 {
		return Catalog{}, errors.New("a release needs at least one channel")
	}
	if !slices.Contains(r.Channels, r.DefaultChannel) && c.channel(r.DefaultChannel) == nil {
		return Catalog{}, fmt.Errorf("the default channel %q is not one of the release's channels %v nor in the catalog", r.DefaultChannel, r.Channels)
	}
	out := Catalog{Bundles: slices.Clone(c.Bundles)}
	if c.Package == nil {
		out.Package = &Package{Schema: SchemaPackage, Name: b.Package}
	} else {
		p := *c.Package
		out.Package = &p
	}
	if out.Package.Name != b.Package {
		return Catalog{}, fmt.Errorf("bundle %s is of package %q, the catalog of %q", b.Name, b.Package, out.Package.Name)
	}
	out.Package.DefaultChannel = r.DefaultChannel
	if i := slices.IndexFunc(out.Bundles, func(x Bundle) bool { return x.Name == b.Name }); i >= 0 {
		out.Bundles[i] = b
	} else {
		out.Bundles = append(out.Bundles, b)
	}
	for _, ch := range c.Channels {
		ch.Entries = slices.Clone(ch.Entries)
		out.Channels = append(out.Channels, ch)
	}
	for _, name := range r.Channels {
		if err := out.publish(name, b); err != nil {
			return Catalog{}, err
		}
	}
	if problems := Lint(out); len(problems) > 0 {
		return Catalog{}, fmt.Errorf("adding %s would break the catalog: %w", b.Name, errors.Join(problems...))
	}
	return out, nil
}

// publish makes b the head of channel name (created when missing), unless
// the channel lists b already.
func (c *Catalog) publish(name string, b Bundle) error {
	ch := c.channel(name)
	if ch == nil {
		c.Channels = append(c.Channels, Channel{Schema: SchemaChannel, Package: c.Package.Name, Name: name})
		ch = &c.Channels[len(c.Channels)-1]
	}
	if slices.ContainsFunc(ch.Entries, func(e ChannelEntry) bool { return e.Name == b.Name }) {
		return nil
	}
	entry := ChannelEntry{Name: b.Name, SkipRange: SkipRange(b.Version)}
	if len(ch.Entries) > 0 {
		heads := Heads(*ch)
		if len(heads) != 1 {
			return fmt.Errorf("channel %q has %d heads %v: fix its graph before adding %s", name, len(heads), heads, b.Name)
		}
		head, ok := c.bundle(heads[0])
		if !ok {
			return fmt.Errorf("channel %q: its head %s is not a bundle of the catalog", name, heads[0])
		}
		if !b.Version.GT(head.Version) {
			return fmt.Errorf("channel %q: %s is not newer than the channel's head %s: raise VERSION", name, b.Name, head.Name)
		}
		entry.Replaces = head.Name
	}
	ch.Entries = append(ch.Entries, entry)
	return nil
}

func (c *Catalog) channel(name string) *Channel {
	for i := range c.Channels {
		if c.Channels[i].Name == name {
			return &c.Channels[i]
		}
	}
	return nil
}

func (c *Catalog) bundle(name string) (Bundle, bool) {
	for _, b := range c.Bundles {
		if b.Name == name {
			return b, true
		}
	}
	return Bundle{}, false
}

// Heads returns the entries of a channel that no other entry of it
// replaces or skips, as opm computes them (a skipRange makes no edge
// here). A good channel has exactly one: the version OLM installs and
// upgrades to.
func Heads(ch Channel) []string {
	names := map[string]bool{}
	for _, e := range ch.Entries {
		names[e.Name] = true
	}
	incoming := map[string]bool{}
	for _, e := range ch.Entries {
		if names[e.Replaces] {
			incoming[e.Replaces] = true
		}
		for _, s := range e.Skips {
			if names[s] {
				incoming[s] = true
			}
		}
	}
	var heads []string
	for _, e := range ch.Entries {
		if !incoming[e.Name] && !slices.Contains(heads, e.Name) {
			heads = append(heads, e.Name)
		}
	}
	slices.Sort(heads)
	return heads
}

// Lint checks the catalog for what breaks upgrades, including what `opm
// validate` does not check (skipRange syntax, replaces of a missing bundle,
// edges to newer versions). It returns one error per problem, each naming
// the channel and entry and saying what to fix; none when the catalog is
// good.
func Lint(c Catalog) []error {
	var problems []error
	report := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if c.Package == nil {
		report("the catalog has no olm.package")
		return problems
	}
	pkg := c.Package.Name
	bundles := map[string]Bundle{}
	for _, b := range c.Bundles {
		if _, dup := bundles[b.Name]; dup {
			report("bundle %s is in the catalog twice", b.Name)
		}
		bundles[b.Name] = b
		if b.Package != pkg {
			report("bundle %s is of package %q, the catalog of %q", b.Name, b.Package, pkg)
		}
	}
	if len(c.Channels) == 0 {
		report("package %s has no channel", pkg)
	}
	if c.Package.DefaultChannel == "" {
		report("package %s has no defaultChannel", pkg)
	} else if !slices.ContainsFunc(c.Channels, func(ch Channel) bool { return ch.Name == c.Package.DefaultChannel }) {
		report("package %s: its defaultChannel %q is not a channel of the catalog", pkg, c.Package.DefaultChannel)
	}
	inChannel := map[string]bool{}
	seenChannels := map[string]bool{}
	for _, ch := range c.Channels {
		if seenChannels[ch.Name] {
			report("channel %q is in the catalog twice", ch.Name)
		}
		seenChannels[ch.Name] = true
		if ch.Package != pkg {
			report("channel %q is of package %q, the catalog of %q", ch.Name, ch.Package, pkg)
		}
		for _, e := range ch.Entries {
			inChannel[e.Name] = true
		}
		problems = append(problems, lintChannel(ch, bundles)...)
	}
	for _, b := range c.Bundles {
		if !inChannel[b.Name] {
			report("bundle %s is in no channel: add it to one or remove it", b.Name)
		}
	}
	return problems
}

// lintChannel checks one channel's graph.
func lintChannel(ch Channel, bundles map[string]Bundle) []error {
	var problems []error
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("channel %q: "+format, append([]any{ch.Name}, args...)...))
	}
	if len(ch.Entries) == 0 {
		report("no entries")
		return problems
	}
	entries := map[string]ChannelEntry{}
	for _, e := range ch.Entries {
		if _, dup := entries[e.Name]; dup {
			report("%s is listed twice", e.Name)
		}
		entries[e.Name] = e
	}
	for _, e := range ch.Entries {
		b, known := bundles[e.Name]
		if !known {
			report("%s is not a bundle of the catalog", e.Name)
		}
		if e.Replaces != "" {
			if _, ok := entries[e.Replaces]; !ok {
				report("%s replaces %s, which is not in the channel: installations of it would never upgrade; replace the channel's previous head", e.Name, e.Replaces)
			} else if r, ok := bundles[e.Replaces]; ok && known && !r.Version.LT(b.Version) {
				report("%s replaces %s, which is not older: an upgrade must go to a newer version", e.Name, e.Replaces)
			}
		}
		for _, s := range e.Skips {
			if _, ok := entries[s]; !ok {
				report("%s skips %s, which is not in the channel", e.Name, s)
			}
		}
		if e.SkipRange != "" {
			inRange, err := semver.ParseRange(e.SkipRange)
			if err != nil {
				report("%s has skipRange %q, which is not a semver range (like \">=0.0.0 <%s\"): %v", e.Name, e.SkipRange, b.Version, err)
			} else if known && inRange(b.Version) {
				report("%s has skipRange %q, which includes its own version %s", e.Name, e.SkipRange, b.Version)
			}
		}
	}
	switch heads := Heads(ch); len(heads) {
	case 0:
		report("no head (every entry is replaced or skipped by another): the replaces chain must end in the newest version")
	case 1:
	default:
		report("%d heads %s: exactly one entry may be left unreplaced; make each newer entry replace the one before it", len(heads), strings.Join(heads, ", "))
	}
	for _, cycle := range replacesCycles(ch) {
		report("replaces cycle %s: an upgrade graph must not loop", strings.Join(cycle, " -> "))
	}
	return problems
}

// replacesCycles returns each cycle of replaces edges once, starting at its
// smallest name, as the path back to that name.
func replacesCycles(ch Channel) [][]string {
	next := map[string]string{}
	for _, e := range ch.Entries {
		next[e.Name] = e.Replaces
	}
	var cycles [][]string
	seen := map[string]bool{}
	for _, e := range ch.Entries {
		var walk []string
		onWalk := map[string]int{}
		for n := e.Name; n != "" && !seen[n]; n = next[n] {
			if i, ok := onWalk[n]; ok {
				cycles = append(cycles, rotate(walk[i:]))
				break
			}
			onWalk[n] = len(walk)
			walk = append(walk, n)
		}
		for _, n := range walk {
			seen[n] = true
		}
	}
	slices.SortFunc(cycles, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return cycles
}

// rotate starts a cycle at its smallest name and closes it.
func rotate(cycle []string) []string {
	start := slices.Index(cycle, slices.Min(cycle))
	out := append(slices.Clone(cycle[start:]), cycle[:start]...)
	return append(out, out[0])
}

// splitDocuments splits a YAML stream into its non-empty documents.
func splitDocuments(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		// The reader keeps a leading separator line with the document.
		if line, rest, found := bytes.Cut(doc, []byte("\n")); found && strings.HasPrefix(string(line), "---") {
			doc = rest
		}
		if len(bytes.TrimSpace(doc)) > 0 && !isComment(doc) {
			docs = append(docs, doc)
		}
	}
}

// isComment reports whether a document holds only comments.
func isComment(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
