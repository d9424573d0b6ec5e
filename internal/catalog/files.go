package catalog

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the catalog under root: every .yaml and .yml file below it
// (dotfiles such as .indexignore are skipped). Other files are an error.
func Load(root string) (Catalog, error) {
	files, err := readFiles(root)
	if err != nil {
		return Catalog{}, err
	}
	return Decode(files)
}

// Write writes the catalog under root as Files lays it out, and removes the
// other YAML files below root: Load read them into c, so nothing is lost.
func Write(root string, c Catalog) error {
	files, err := c.Files()
	if err != nil {
		return err
	}
	old, err := readFiles(root)
	if err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	for name := range old {
		if _, keep := files[name]; !keep {
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(name))); err != nil {
				return err
			}
		}
	}
	return nil
}

// readFiles reads the YAML files below root by slash-separated relative
// path; a missing root is an empty catalog.
func readFiles(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml":
		default:
			return fmt.Errorf("%s: the catalog holds only YAML files", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}
