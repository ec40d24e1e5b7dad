package sysinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// existingDir returns path if it is an existing directory, otherwise its
// nearest existing ancestor directory, so that the free space of a volume can
// be asked about before a cache directory is created on it.
func existingDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sysinfo: disk space of %q: %w", path, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return p, nil
		case err == nil:
			// A file: ask about the directory that holds it.
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("sysinfo: disk space of %q: %w", path, err)
		}
		if parent := filepath.Dir(p); parent == p {
			return "", fmt.Errorf("sysinfo: disk space of %q: no existing directory on the path", path)
		}
	}
}
