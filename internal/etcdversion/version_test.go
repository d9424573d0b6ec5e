package etcdversion

import (
	"strings"
	"testing"
)

func TestImageVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		image string
		want  string // "" when there is none
	}{
		{"quay.io/coreos/etcd:v3.6.16", "3.6.16"},
		{"registry.example.com:5000/etcd:3.5.21", "3.5.21"},
		{"registry.example.com:5000/etcd", ""},
		{"gcr.io/etcd-development/etcd:v3.6.0-rc.1", "3.6.0"},
		{"quay.io/coreos/etcd:latest", ""},
		{"quay.io/coreos/etcd@sha256:abcd", ""},
		{"quay.io/coreos/etcd:v3.6.16@sha256:abcd", "3.6.16"},
	}
	for _, tt := range tests {
		got, ok := OfImage(tt.image)
		if (tt.want == "") == ok || (ok && got.String() != tt.want) {
			t.Errorf("OfImage(%q) = %v, %v; want %q", tt.image, got, ok, tt.want)
		}
	}
}

func TestCheckUpgrade(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to string
		refused  string // part of the error; "" when allowed
	}{
		{"3.6.15", "3.6.16", ""},
		{"3.6.16", "3.6.15", ""},
		{"3.5.21", "3.6.16", ""},
		{"3.5.20", "3.6.0", ""},
		{"3.5.12", "3.6.16", "asks for 3.5.20 or later first"},
		{"3.5.21", "3.7.0", "one minor version at a time; upgrade to 3.6 first"},
		{"3.6.16", "3.5.21", "etcdctl downgrade enable 3.5"},
		{"3.6.16", "4.0.0", "major version"},
		{"3.6.16", "3.7.0", ""},
	}
	for _, tt := range tests {
		from, _ := Parse(tt.from)
		to, _ := Parse(tt.to)
		err := CheckUpgrade(from, to)
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("%s -> %s refused: %v", tt.from, tt.to, err)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
			t.Errorf("%s -> %s: %v, want it refused saying %q", tt.from, tt.to, err, tt.refused)
		}
	}
}
