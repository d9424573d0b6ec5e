package localcluster

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestLastLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data string
		n    int64
		want string
	}{
		{"a\nb\nc\n", -1, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"", 3, ""},
		{"\n\n", 1, "\n"},
	} {
		if got := string(lastLines([]byte(tc.data), tc.n)); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.data, tc.n, got, tc.want)
		}
	}
}

func TestLimitedWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := &limitedWriter{w: &b, limit: 5}
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("defg")); n != 2 || !errors.Is(err, errLimitReached) {
		t.Fatalf("write past the limit: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("h")); n != 0 || !errors.Is(err, errLimitReached) {
		t.Fatalf("write at the limit: %d, %v", n, err)
	}
	if b.String() != "abcde" {
		t.Errorf("wrote %q, want abcde", b.String())
	}
	b.Reset()
	unlimited := &limitedWriter{w: &b}
	if _, err := unlimited.Write([]byte(strings.Repeat("x", 100))); err != nil || b.Len() != 100 {
		t.Errorf("no limit: %v, %d bytes", err, b.Len())
	}
}

func TestParseLogRequest(t *testing.T) {
	t.Parallel()
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	got, err := parseLogRequest(q("follow=true&previous=true&tailLines=10&limitBytes=20"))
	if err != nil || got != (logRequest{follow: true, previous: true, tailLines: 10, limitBytes: 20}) {
		t.Errorf("all options: %+v, %v", got, err)
	}
	if got, err := parseLogRequest(q("")); err != nil || got != (logRequest{tailLines: -1}) {
		t.Errorf("no options: %+v, %v", got, err)
	}
	for _, bad := range []string{"timestamps=true", "sinceSeconds=10", "sinceTime=2026-12-01T00:00:00Z", "tailLines=-2", "limitBytes=x"} {
		if _, err := parseLogRequest(q(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := parseLogRequest(q("timestamps=false")); err != nil {
		t.Errorf("timestamps=false: %v", err)
	}
}
