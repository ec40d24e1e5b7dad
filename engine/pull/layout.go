package pull

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/internal/atomicfile"
)

// storeLayout puts a download straight into a model directory of the
// store: partial files under its work directory, each verified blob
// renamed to its path (a file appears there only once verified, as a
// blob does in the Hugging Face cache, so a file in place with its size is
// complete).
type storeLayout struct {
	dir string
}

func (s storeLayout) Dir(string) string { return s.dir }

func (s storeLayout) PartialPath(etag string) string {
	return filepath.Join(workDir(s.dir), etag+".incomplete")
}

func (s storeLayout) LockPath(etag string) string {
	return filepath.Join(workDir(s.dir), etag+".lock")
}

func (s storeLayout) path(p string) string { return filepath.Join(s.dir, filepath.FromSlash(p)) }

func (s storeLayout) Complete(f hub.File) bool {
	fi, err := os.Stat(s.path(f.Path))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == f.Size
}

func (s storeLayout) Place(_ string, f hub.File, paths []string, partial string) error {
	first := s.path(paths[0])
	if partial != "" {
		if err := os.MkdirAll(filepath.Dir(first), 0o755); err != nil {
			return fmt.Errorf("publish %s: %w", paths[0], err)
		}
		if err := os.Rename(partial, first); err != nil {
			return fmt.Errorf("publish %s: %w", paths[0], err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(first)); err != nil {
			return fmt.Errorf("publish %s: %w", paths[0], err)
		}
	}
	// Files with the same content share the first one's bytes.
	for _, p := range paths[1:] {
		dst := s.path(p)
		if fi, err := os.Stat(dst); err == nil && fi.Size() == f.Size {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Link(first, dst); err != nil && !errors.Is(err, os.ErrExist) {
			if err := copyFile(first, dst); err != nil {
				return fmt.Errorf("publish %s: %w", p, err)
			}
		}
	}
	return nil
}

func (s storeLayout) Finish(string, string) error { return nil }

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFrom(dst, in, 0o644)
}

// notifyLayout tells its owner about every file a job places.
type notifyLayout struct {
	download.Layout
	placed func(f hub.File, paths []string)
}

func (n notifyLayout) Place(commit string, f hub.File, paths []string, partial string) error {
	if err := n.Layout.Place(commit, f, paths, partial); err != nil {
		return err
	}
	n.placed(f, paths)
	return nil
}
