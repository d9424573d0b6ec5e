package netsvc

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeIP is a runFunc that records commands and fails those whose arguments
// start with a key of failures, with that key's output.
type fakeIP struct {
	failures map[string]string
	ran      []string
}

// run records and answers one ip command.
func (f *fakeIP) run(args ...string) (string, error) {
	cmd := strings.Join(args, " ")
	f.ran = append(f.ran, cmd)
	for prefix, out := range f.failures {
		if strings.HasPrefix(cmd, prefix) {
			return out, errors.New("exit status 2")
		}
	}
	return "", nil
}

// TestIPAddrManager checks the ip commands run and which failures count as done.
func TestIPAddrManager(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		remove   bool
		ip       string
		failures map[string]string
		wantRan  []string
		wantErr  bool
	}{{
		name:    "add",
		ip:      "10.96.0.10",
		wantRan: []string{"addr add 10.96.0.10/32 dev svc0"},
	}, {
		name:     "add an address already there",
		ip:       "10.96.0.10",
		failures: map[string]string{"addr add": "RTNETLINK answers: File exists"},
		wantRan:  []string{"addr add 10.96.0.10/32 dev svc0"},
	}, {
		name:     "add fails",
		ip:       "10.96.0.10",
		failures: map[string]string{"addr add": "RTNETLINK answers: Operation not permitted"},
		wantRan:  []string{"addr add 10.96.0.10/32 dev svc0"},
		wantErr:  true,
	}, {
		name:    "add refuses what is not an IPv4 address",
		ip:      "10.96.0.10/8",
		wantErr: true,
	}, {
		name:    "add refuses IPv6",
		ip:      "fd00::1",
		wantErr: true,
	}, {
		name:    "remove",
		remove:  true,
		ip:      "10.96.0.10",
		wantRan: []string{"addr del 10.96.0.10/32 dev svc0"},
	}, {
		name:     "remove an address already gone",
		remove:   true,
		ip:       "10.96.0.10",
		failures: map[string]string{"addr del": "RTNETLINK answers: Cannot assign requested address"},
		wantRan:  []string{"addr del 10.96.0.10/32 dev svc0"},
	}, {
		name:     "remove from a link already gone",
		remove:   true,
		ip:       "10.96.0.10",
		failures: map[string]string{"addr del": `Cannot find device "svc0"`},
		wantRan:  []string{"addr del 10.96.0.10/32 dev svc0"},
	}, {
		name:     "remove fails",
		remove:   true,
		ip:       "10.96.0.10",
		failures: map[string]string{"addr del": "RTNETLINK answers: Operation not permitted"},
		wantRan:  []string{"addr del 10.96.0.10/32 dev svc0"},
		wantErr:  true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := &fakeIP{failures: tt.failures}
			m := IPAddrManager{Link: "svc0", run: ip.run}
			op := m.Add
			if tt.remove {
				op = m.Remove
			}
			err := op(tt.ip)
			if (err != nil) != tt.wantErr {
				t.Errorf("error = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(ip.ran, tt.wantRan) {
				t.Errorf("ran %q, want %q", ip.ran, tt.wantRan)
			}
		})
	}
}

// TestEnsureDummyLink checks the ip commands run to create and set up the link.
func TestEnsureDummyLink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		link     string
		failures map[string]string
		wantRan  []string
		wantErr  bool
	}{{
		name:    "missing link is created",
		link:    "svc0",
		wantRan: []string{"link add svc0 type dummy", "link set svc0 up"},
	}, {
		name:     "existing link is set up",
		link:     "svc0",
		failures: map[string]string{"link add": "RTNETLINK answers: File exists"},
		wantRan:  []string{"link add svc0 type dummy", "link set svc0 up"},
	}, {
		name:     "create fails",
		link:     "svc0",
		failures: map[string]string{"link add": "RTNETLINK answers: Operation not permitted"},
		wantRan:  []string{"link add svc0 type dummy"},
		wantErr:  true,
	}, {
		name:     "set up fails",
		link:     "svc0",
		failures: map[string]string{"link set": "RTNETLINK answers: Operation not permitted"},
		wantRan:  []string{"link add svc0 type dummy", "link set svc0 up"},
		wantErr:  true,
	}, {
		name:    "empty name",
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := &fakeIP{failures: tt.failures}
			err := ensureDummyLink(ip.run, tt.link)
			if (err != nil) != tt.wantErr {
				t.Errorf("error = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(ip.ran, tt.wantRan) {
				t.Errorf("ran %q, want %q", ip.ran, tt.wantRan)
			}
		})
	}
}
