// Package etcdversion reads etcd versions from strings and image tags and
// says which version changes etcd supports, for the builders and the
// topology plan alike.
package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd server version, such as 3.6.16.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// minor is "3.6" of 3.6.16.
func (v Version) minor() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

func (v Version) less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// Parse parses "3.6.16", "v3.6.16" or "v3.6.16-rc.1" (the
// pre-release is ignored).
func Parse(s string) (Version, bool) {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "-")
	s, _, _ = strings.Cut(s, "+")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, true
}

// OfImage is the etcd version an image's tag names
// ("quay.io/coreos/etcd:v3.6.16", "registry:5000/etcd:3.5.21-custom"); false
// when the tag names none (a digest, "latest").
func OfImage(image string) (Version, bool) {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return Version{}, false
	}
	return Parse(image[i+1:])
}

// minimumBeforeMinor is the patch release a minor version must run before
// the next minor version may join: etcd's upgrade guide for 3.6 asks for
// 3.5.20 or later (earlier 3.5 members fail the upgrade with "too many
// learner members").
var minimumBeforeMinor = map[string]Version{
	"3.5": {3, 5, 20},
}

// CheckUpgrade tells whether members running from may be replaced, one at
// a time, by members running to, as etcd supports: any patch change within
// a minor version, or one minor version up from a recent enough patch
// release. The error says why not, and what to do instead.
func CheckUpgrade(from, to Version) error {
	switch {
	case from.Major != to.Major:
		return fmt.Errorf("etcd %s cannot be replaced by %s: etcd does not support changing the major version", from, to)
	case from.Minor == to.Minor:
		return nil
	case to.Minor < from.Minor:
		return fmt.Errorf("etcd %s cannot be downgraded to %s: etcd downgrades a minor version only through its downgrade API (etcdctl downgrade enable %s), which the operator does not drive; go back to a %s image", from, to, to.minor(), from.minor())
	case to.Minor > from.Minor+1:
		return fmt.Errorf("etcd %s cannot be upgraded to %s: etcd upgrades one minor version at a time; upgrade to %d.%d first", from, to, from.Major, from.Minor+1)
	}
	if least, ok := minimumBeforeMinor[from.minor()]; ok && from.less(least) {
		return fmt.Errorf("etcd %s cannot be upgraded to %s: etcd's upgrade guide asks for %s or later first; upgrade to the latest %s patch release, then to %s", from, to, least, from.minor(), to.minor())
	}
	return nil
}
