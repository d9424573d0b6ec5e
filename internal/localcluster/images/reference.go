package images

import (
	"fmt"
	"regexp"
	"strings"
)

// reference is a parsed image reference.
type reference struct {
	// repo is the repository with its registry: docker.io/library/busybox.
	repo string
	// tag is the tag; latest when the reference has neither tag nor digest,
	// empty when it has a digest only.
	tag string
	// digest is the digest without '@' (sha256:...), or empty.
	digest string
}

// String returns the normalised reference: repo[:tag][@digest].
func (r reference) String() string {
	s := r.repo
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// name returns the last path component of the repository: busybox.
func (r reference) name() string {
	return r.repo[strings.LastIndexByte(r.repo, '/')+1:]
}

var (
	// domainRE is a registry host with an optional port.
	domainRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$`)
	// componentRE is one path component of a repository.
	componentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// tagRE is a tag.
	tagRE = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	// digestRE is a digest.
	digestRE = regexp.MustCompile(`^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$`)
)

// parse parses and normalises an image reference as a container runtime
// does: a reference without a registry is on docker.io, a single-component
// docker.io repository is under library/, and a reference with neither tag
// nor digest has the tag latest.
func parse(ref string) (reference, error) {
	rest, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest && !digestRE.MatchString(digest) {
		return reference{}, fmt.Errorf("invalid digest %q", digest)
	}
	repo, tag := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		repo, tag = rest[:i], rest[i+1:]
		if !tagRE.MatchString(tag) {
			return reference{}, fmt.Errorf("invalid tag %q", tag)
		}
	}
	components := strings.Split(repo, "/")
	domain := "docker.io"
	if first := components[0]; len(components) > 1 && (strings.ContainsAny(first, ".:") || first == "localhost") {
		if !domainRE.MatchString(first) {
			return reference{}, fmt.Errorf("invalid registry %q", first)
		}
		domain, components = first, components[1:]
	}
	for _, c := range components {
		if !componentRE.MatchString(c) {
			return reference{}, fmt.Errorf("invalid repository name %q", repo)
		}
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && len(components) == 1 {
		components = []string{"library", components[0]}
	}
	if tag == "" && !hasDigest {
		tag = "latest"
	}
	return reference{repo: domain + "/" + strings.Join(components, "/"), tag: tag, digest: digest}, nil
}

// Normalize returns ref in the full form a container runtime reports:
// registry/repository:tag (docker.io/library/busybox:latest for busybox),
// keeping a digest (@sha256:...) and adding no tag to a reference that has
// a digest only. An invalid reference is an error.
func Normalize(ref string) (string, error) {
	r, err := parse(ref)
	if err != nil {
		return "", fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	return r.String(), nil
}
