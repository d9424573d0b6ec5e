package support

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CopyFromRepo copies the named files and directories of the repository
// at root into dir, keeping execute permissions: what a test that makes a
// release in a copy (`make bundle catalog VERSION=...`) needs of it.
func CopyFromRepo(t testing.TB, root, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		src := filepath.Join(root, p)
		info, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, p)
		if info.IsDir() {
			if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// WithoutMakeFlags drops what an outer make passes to a nested one
// (`make test VERSION=x` would otherwise reach the copy).
func WithoutMakeFlags(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		for _, k := range []string{"MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=", "MAKEOVERRIDES="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
}
