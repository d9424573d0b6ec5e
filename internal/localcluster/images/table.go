package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Image repositories the local cluster knows, normalised.
const (
	// OperatorRepository is the operator's image; any tag runs binDir/manager.
	OperatorRepository = "ghcr.io/etcd-operator/etcd-operator"
	// CertManagerControllerRepository is cert-manager's controller image; tag
	// T runs binDir/cert-manager-controller-T.
	CertManagerControllerRepository = "quay.io/jetstack/cert-manager-controller"
	// KubeAPIServerRepository is kube-apiserver's image; tag T has
	// binDir/kube-apiserver-T as its kube-apiserver command.
	KubeAPIServerRepository = "registry.k8s.io/kube-apiserver"
	// VersityGWRepository is versitygw's image, the S3 server of the local
	// cluster (hack/localcluster/s3.yaml); tag T runs binDir/versitygw-T.
	VersityGWRepository = "docker.io/versity/versitygw"
	// OLMRepository is the Operator Lifecycle Manager's image; tag T runs
	// the commands in binDir/olm-T/ (`make olm-binaries`).
	OLMRepository = "quay.io/operator-framework/olm"
	// OPMRepository is operator-registry's opm image; tag T runs
	// binDir/opm-T, its entrypoint, and has grpc_health_probe (the newest
	// binDir/grpc_health_probe-V).
	OPMRepository = "quay.io/operator-framework/opm"
)

// olmCommands are the commands of OLM's image that binDir/olm-T/ holds
// (its package-server is left out: nothing here serves packagemanifests).
var olmCommands = []string{"olm", "catalog", "copy-content", "cpb"}

// etcdRepositories are the etcd images, each with whether its tags are in
// the registry.k8s.io style (3.6.4-0: no v, a build number after the dash).
var etcdRepositories = map[string]bool{
	"quay.io/coreos/etcd":          false,
	"gcr.io/etcd-development/etcd": false,
	"docker.io/library/etcd":       false,
	"registry.k8s.io/etcd":         true,
	"k8s.gcr.io/etcd":              true,
}

// hostImages are the general-purpose images (the last component of the
// repository, on any registry) run with the host's commands, each with its
// default command (the image's CMD).
var hostImages = map[string]string{
	"busybox": "sh",
	"alpine":  "sh",
	"debian":  "bash",
	"ubuntu":  "bash",
}

var (
	// etcdTagRE is an etcd version tag: v3.6.16, 3.6.16, v3.6.0-rc.1, 3.6.4-0.
	etcdTagRE = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9A-Za-z.-]+))?$`)
	// buildNumberRE is the build number of a registry.k8s.io etcd tag.
	buildNumberRE = regexp.MustCompile(`^[0-9]+$`)
	// etcdBinaryRE is the name of an etcd binary in binDir.
	etcdBinaryRE = regexp.MustCompile(`^etcd-(v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?)$`)
)

// Table resolves image references to what runs on the host. It reads binDir
// on each Resolve, so binaries built after NewTable are found.
type Table struct {
	binDir string
	// path is the PATH searched for host commands; empty means $PATH.
	path string
}

// NewTable returns the table of the local cluster's images for the binaries
// in binDir (the Makefile's bin/):
//
//   - etcd by version tag: quay.io/coreos/etcd:vX.Y.Z,
//     gcr.io/etcd-development/etcd:vX.Y.Z, registry.k8s.io/etcd:X.Y.Z-0 and
//     etcd:vX.Y.Z run binDir/etcd-vX.Y.Z, which must exist; the image's
//     etcdctl and etcdutl are binDir/etcdctl-vX.Y.Z and binDir/etcdutl-vX.Y.Z
//     when they exist. The image has no entrypoint and runs etcd by default;
//   - ghcr.io/etcd-operator/etcd-operator with any tag runs binDir/manager,
//     its entrypoint, also known as /manager;
//   - quay.io/jetstack/cert-manager-controller:T runs
//     binDir/cert-manager-controller-T, its entrypoint;
//   - versity/versitygw:T runs binDir/versitygw-T, its entrypoint, also
//     known as versitygw;
//   - quay.io/operator-framework/olm:T runs the commands in binDir/olm-T/
//     (olm, its entrypoint, catalog, copy-content, cpb) and the host's cp;
//   - busybox, alpine, debian and ubuntu, on any registry and with any tag or
//     digest, run the host's commands (HostCommands), sh or bash by default.
func NewTable(binDir string) *Table {
	return &Table{binDir: binDir}
}

// Resolve returns the Image for ref. Its error is what a user reads in the
// pod's ErrImagePull status: it names the image and says which images the
// local cluster runs, with the versions and tags found in binDir.
func (t *Table) Resolve(ref string) (Image, error) {
	r, err := parse(ref)
	if err != nil {
		return Image{}, fmt.Errorf("invalid image reference %q: %w; %s", ref, err, t.known())
	}
	img, err := t.resolve(ref, r)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w; %s", ref, err, t.known())
	}
	img.Ref, img.path = ref, t.path
	return img, nil
}

// resolve returns the Image of the parsed reference r.
func (t *Table) resolve(ref string, r reference) (Image, error) {
	if img, ok, err := t.directoryImage(r); ok {
		return img, err
	}
	if k8sStyle, ok := etcdRepositories[r.repo]; ok {
		return t.etcd(r, k8sStyle)
	}
	if r.repo == OperatorRepository {
		return t.operator()
	}
	if r.repo == CertManagerControllerRepository {
		return t.certManager(r)
	}
	if r.repo == KubeAPIServerRepository {
		return t.kubeAPIServer(r)
	}
	if r.repo == VersityGWRepository {
		return t.versityGW(r)
	}
	if r.repo == OLMRepository {
		return t.olm(r)
	}
	if r.repo == OPMRepository {
		return t.opm(r)
	}
	if cmd, ok := hostImages[r.name()]; ok {
		return t.host(cmd), nil
	}
	return Image{}, fmt.Errorf("%s is not an image of the local cluster, which pulls from no registry", r)
}

// etcd returns the Image of an etcd reference r.
func (t *Table) etcd(r reference, k8sStyle bool) (Image, error) {
	v, ok := etcdVersion(r.tag, k8sStyle)
	if !ok {
		return Image{}, errors.New("the local cluster runs etcd images by version tag (vX.Y.Z) only")
	}
	etcd := filepath.Join(t.binDir, "etcd-"+v)
	if !isFile(etcd) {
		return Image{}, fmt.Errorf("no etcd %s in the local cluster (no file %s)", v, etcd)
	}
	img := Image{Binaries: map[string]string{"etcd": etcd}, Cmd: []string{etcd}}
	for _, tool := range []string{"etcdctl", "etcdutl"} {
		if p := filepath.Join(t.binDir, tool+"-"+v); isFile(p) {
			img.Binaries[tool] = p
		}
	}
	return img, nil
}

// etcdVersion returns the etcd version (v3.6.16) that tag names; ok is false
// when tag is no version.
func etcdVersion(tag string, k8sStyle bool) (v string, ok bool) {
	m := etcdTagRE.FindStringSubmatch(tag)
	switch {
	case m == nil:
		return "", false
	case m[2] == "":
		return "v" + m[1], true
	case k8sStyle && buildNumberRE.MatchString(m[2]):
		return "v" + m[1], true
	case k8sStyle:
		return "", false
	}
	return "v" + m[1] + "-" + m[2], true
}

// operator returns the Image of the operator.
func (t *Table) operator() (Image, error) {
	manager := filepath.Join(t.binDir, "manager")
	if !isFile(manager) {
		return Image{}, fmt.Errorf("the operator is not built (no file %s: run make build)", manager)
	}
	return Image{Binaries: map[string]string{"manager": manager}, Entrypoint: []string{manager}}, nil
}

// certManager returns the Image of cert-manager's controller reference r.
func (t *Table) certManager(r reference) (Image, error) {
	controller, err := t.taggedBinary(r, "cert-manager", "cert-manager-controller-", "")
	if err != nil {
		return Image{}, err
	}
	return Image{
		Binaries:   map[string]string{"cert-manager-controller": controller, "controller": controller},
		Entrypoint: []string{controller},
	}, nil
}

// kubeAPIServer returns the Image of a kube-apiserver reference r: like the
// real image, it has no entrypoint and its command is kube-apiserver.
func (t *Table) kubeAPIServer(r reference) (Image, error) {
	bin := filepath.Join(t.binDir, "kube-apiserver-"+r.tag)
	if r.tag == "" || !isFile(bin) {
		return Image{}, fmt.Errorf("no kube-apiserver %q in the local cluster (no file %s)", r.tag, bin)
	}
	return Image{Binaries: map[string]string{"kube-apiserver": bin}}, nil
}

// versityGW returns the Image of a versitygw reference r. The image's
// entrypoint, docker-entrypoint.sh, runs versitygw with the container's
// args when it has any, which is what this one does; its other mode (no
// args: the command line is made from VGW_BACKEND and VGW_*ARGS) is not
// reproduced.
func (t *Table) versityGW(r reference) (Image, error) {
	bin, err := t.taggedBinary(r, "versitygw", "versitygw-", "make localcluster-binaries")
	if err != nil {
		return Image{}, err
	}
	return Image{Binaries: map[string]string{"versitygw": bin}, Entrypoint: []string{bin}}, nil
}

// olm returns the Image of an OLM reference r. Like the real image, its
// entrypoint is olm, its commands are in /bin, and it has cp, which OLM's
// bundle unpack Jobs run (the host's).
func (t *Table) olm(r reference) (Image, error) {
	if r.tag == "" {
		return Image{}, errors.New("the local cluster runs OLM by tag only")
	}
	dir := filepath.Join(t.binDir, "olm-"+r.tag)
	img := Image{Binaries: map[string]string{}}
	for _, name := range olmCommands {
		p := filepath.Join(dir, name)
		if !isFile(p) {
			return Image{}, fmt.Errorf("no OLM %s in the local cluster (no file %s: run make olm-binaries)", r.tag, p)
		}
		img.Binaries[name] = p
	}
	if cp, ok := lookPath("cp", t.path); ok {
		img.Binaries["cp"] = cp
	}
	// Bundle unpack Jobs copy /bin/cpb by path: the commands are files of
	// the image too, at their paths in it.
	img.Files = map[string]string{}
	for _, name := range olmCommands {
		img.Files["/bin/"+name] = img.Binaries[name]
	}
	img.Entrypoint = []string{img.Binaries["olm"]}
	return img, nil
}

// opm returns the Image of an opm reference r: opm, its entrypoint, and
// grpc_health_probe, which catalog Pods' probes run.
func (t *Table) opm(r reference) (Image, error) {
	opm, err := t.taggedBinary(r, "opm", "opm-", "make olm-binaries")
	if err != nil {
		return Image{}, err
	}
	probes := suffixes(t.files(), "grpc_health_probe-")
	if len(probes) == 0 {
		return Image{}, fmt.Errorf("no grpc_health_probe in the local cluster (no file %s: run make olm-binaries)", filepath.Join(t.binDir, "grpc_health_probe-VERSION"))
	}
	slices.SortFunc(probes, compareVersions)
	return Image{
		Binaries:   map[string]string{"opm": opm, "grpc_health_probe": filepath.Join(t.binDir, "grpc_health_probe-"+probes[len(probes)-1])},
		Entrypoint: []string{opm},
	}, nil
}

// taggedBinary returns binDir/PREFIX-TAG, the binary of what for reference
// r, which must have a tag; its errors say so, or name the missing file and
// the make target (build) that builds it.
func (t *Table) taggedBinary(r reference, what, prefix, build string) (string, error) {
	if r.tag == "" {
		return "", fmt.Errorf("the local cluster runs %s by tag only", what)
	}
	bin := filepath.Join(t.binDir, prefix+r.tag)
	if isFile(bin) {
		return bin, nil
	}
	if build != "" {
		return "", fmt.Errorf("no %s %s in the local cluster (no file %s: run %s)", what, r.tag, bin, build)
	}
	return "", fmt.Errorf("no %s %s in the local cluster (no file %s)", what, r.tag, bin)
}

// host returns the Image of a general-purpose image whose default command is
// cmd; without cmd on the host the image has no default command.
func (t *Table) host(cmd string) Image {
	img := Image{HostCommands: true}
	if p, ok := lookPath(cmd, t.path); ok {
		img.Cmd = []string{p}
	}
	return img
}

// known describes the images the local cluster runs, for error messages.
func (t *Table) known() string {
	manager := "built"
	if !isFile(filepath.Join(t.binDir, "manager")) {
		manager = "not built: run make build"
	}
	return fmt.Sprintf("the local cluster runs only: etcd as quay.io/coreos/etcd:vX.Y.Z, gcr.io/etcd-development/etcd:vX.Y.Z, "+
		"registry.k8s.io/etcd:X.Y.Z-0 or etcd:vX.Y.Z (versions in %s: %s); "+
		"the operator as %s:<any tag> (manager %s); "+
		"cert-manager as %s:<tag> (tags in %s: %s); "+
		"kube-apiserver as %s:<tag> (tags in %s: %s); "+
		"versitygw as %s:<tag> (tags in %s: %s); "+
		"OLM as %s:<tag> (tags in %s: %s); "+
		"opm as %s:<tag> (tags in %s: %s); "+
		"images of files in %s; "+
		"busybox, alpine, debian and ubuntu on any registry with any tag, with the host's commands",
		t.binDir, orNone(t.etcdVersions()),
		OperatorRepository, manager,
		CertManagerControllerRepository, t.binDir, orNone(suffixes(t.files(), "cert-manager-controller-")),
		KubeAPIServerRepository, t.binDir, orNone(suffixes(t.files(), "kube-apiserver-")),
		VersityGWRepository, t.binDir, orNone(suffixes(t.files(), "versitygw-")),
		OLMRepository, t.binDir, orNone(t.olmTags()),
		OPMRepository, t.binDir, orNone(suffixes(t.files(), "opm-")),
		filepath.Join(t.binDir, DirectoryImagesDir))
}

// etcdVersions returns the versions of the etcd binaries in binDir, oldest
// first.
func (t *Table) etcdVersions() []string {
	var versions []string
	for _, name := range t.files() {
		if m := etcdBinaryRE.FindStringSubmatch(name); m != nil {
			versions = append(versions, m[1])
		}
	}
	slices.SortFunc(versions, compareVersions)
	return versions
}

// olmTags returns the tags of the OLM builds in binDir (olm-T/olm), sorted.
func (t *Table) olmTags() []string {
	return suffixes(t.names(func(name string) bool { return isFile(filepath.Join(t.binDir, name, "olm")) }), "olm-")
}

// suffixes returns what follows prefix in those of names that start with
// it, sorted.
func suffixes(names []string, prefix string) []string {
	var out []string
	for _, name := range names {
		if s, ok := strings.CutPrefix(name, prefix); ok && s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// files returns the names of the regular files (after symlinks) in binDir.
func (t *Table) files() []string {
	return t.names(func(name string) bool { return isFile(filepath.Join(t.binDir, name)) })
}

// names returns the names in binDir that keep accepts.
func (t *Table) names(keep func(name string) bool) []string {
	entries, err := os.ReadDir(t.binDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// compareVersions orders semantic versions (v3.5.21 before v3.6.0-rc.1
// before v3.6.0), and anything unparsable by name after them.
func compareVersions(a, b string) int {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA == nil && errB == nil && va.LessThan(vb):
		return -1
	case errA == nil && errB == nil && vb.LessThan(va):
		return 1
	case errA == nil && errB == nil:
		return 0
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// orNone joins list with ", ", or says none.
func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
