package images

import (
	"strings"
	"testing"
)

const digest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ref, want, wantErr string
	}{
		{"busybox", "docker.io/library/busybox:latest", ""},
		{"busybox:1.36", "docker.io/library/busybox:1.36", ""},
		{"library/busybox:1.36", "docker.io/library/busybox:1.36", ""},
		{"docker.io/busybox", "docker.io/library/busybox:latest", ""},
		{"docker.io/library/busybox:1.36", "docker.io/library/busybox:1.36", ""},
		{"index.docker.io/library/busybox:1.36", "docker.io/library/busybox:1.36", ""},
		{"bitnami/etcd:3.6", "docker.io/bitnami/etcd:3.6", ""},
		{"quay.io/coreos/etcd:v3.6.16", "quay.io/coreos/etcd:v3.6.16", ""},
		{"registry.k8s.io/etcd:3.6.4-0", "registry.k8s.io/etcd:3.6.4-0", ""},
		{"localhost/foo", "localhost/foo:latest", ""},
		{"localhost:5000/foo/bar:v1", "localhost:5000/foo/bar:v1", ""},
		{"foo:5000", "docker.io/library/foo:5000", ""},
		{"my-registry.example.com:443/a/b_c/d-e:v_1.2", "my-registry.example.com:443/a/b_c/d-e:v_1.2", ""},
		{"busybox@" + digest, "docker.io/library/busybox@" + digest, ""},
		{"busybox:1.36@" + digest, "docker.io/library/busybox:1.36@" + digest, ""},
		{"", "", `invalid image reference "": invalid repository name ""`},
		{"Busybox", "", `invalid image reference "Busybox": invalid repository name "Busybox"`},
		{"busybox:", "", `invalid image reference "busybox:": invalid tag ""`},
		{"busybox:bad tag", "", `invalid image reference "busybox:bad tag": invalid tag "bad tag"`},
		{":1.36", "", `invalid image reference ":1.36": invalid repository name ""`},
		{"a//b", "", `invalid image reference "a//b": invalid repository name "a//b"`},
		{"busybox@sha256:abc", "", `invalid image reference "busybox@sha256:abc": invalid digest "sha256:abc"`},
		{"bad_host.io/x", "", `invalid image reference "bad_host.io/x": invalid registry "bad_host.io"`},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			got, err := Normalize(tt.ref)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("Normalize(%q) = %q, %v; want error %q", tt.ref, got, err, tt.wantErr)
			case got != tt.want:
				t.Errorf("Normalize(%q) = %q, want %q", tt.ref, got, tt.want)
			}
		})
	}
}

func TestReferenceName(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]string{
		"busybox":                          "busybox",
		"registry.k8s.io/e2e/busybox:1.36": "busybox",
		"quay.io/coreos/etcd@" + digest:    "etcd",
	} {
		r, err := parse(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.name(); got != want {
			t.Errorf("name of %q = %q, want %q", ref, got, want)
		}
		if strings.Contains(ref, "@") && r.tag != "" {
			t.Errorf("digest-only %q got tag %q", ref, r.tag)
		}
	}
}
