package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestWatchNamespaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  []string // nil: all namespaces
	}{
		{"", nil},
		{" , ", nil},
		{"team-a", []string{"team-a"}},
		{"team-a, team-b,,team-a", []string{"team-a", "team-b"}},
	}
	for _, tt := range tests {
		got := watchNamespaces(tt.value)
		if tt.want == nil {
			if got != nil {
				t.Errorf("watchNamespaces(%q) = %v, want nil (all namespaces)", tt.value, got)
			}
			continue
		}
		keys := sets.List(sets.KeySet(got))
		if !slices.Equal(keys, tt.want) {
			t.Errorf("watchNamespaces(%q) = %v, want %v", tt.value, keys, tt.want)
		}
	}
}

func TestLeaseTimesValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lease leaseTimes
		flag  string // "" when valid
	}{
		{leaseTimes{15 * time.Second, 10 * time.Second, 2 * time.Second}, ""},
		{leaseTimes{6 * time.Second, 4 * time.Second, time.Second}, ""},
		{leaseTimes{15 * time.Second, 10 * time.Second, 0}, "--leader-elect-retry-period"},
		{leaseTimes{15 * time.Second, 2 * time.Second, 2 * time.Second}, "--leader-elect-renew-deadline"},
		{leaseTimes{10 * time.Second, 10 * time.Second, 2 * time.Second}, "--leader-elect-lease-duration"},
	}
	for _, tt := range tests {
		err := tt.lease.validate()
		switch {
		case tt.flag == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tt.lease, err)
		case tt.flag != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.flag+"=")):
			t.Errorf("%+v: %v, want an error naming %s first", tt.lease, err, tt.flag)
		}
	}
}
