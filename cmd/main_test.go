package main

import (
	"slices"
	"testing"

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
