package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, atomically and durably, creating the
// parent directory if needed. perm applies to the new file.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// WriteFrom replaces path with what r yields, like WriteFile.
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// File is a replacement for a path being written. Nothing is visible at the
// path until Commit; Abort (or a failed Commit) leaves the old file as it was
// and removes the temporary one.
type File struct {
	*os.File
	path string
	perm os.FileMode
	done bool
}

// Create starts a replacement for path in path's directory.
func Create(path string, perm os.FileMode) (*File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	return &File{File: f, path: path, perm: perm}, nil
}

// Path is the path the file replaces when committed.
func (f *File) Path() string { return f.path }

// Commit syncs the data, renames the file over its path and syncs the
// directory.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("commit %s: already finished", f.path)
	}
	f.done = true
	tmp := f.File.Name()
	err := f.File.Chmod(f.perm)
	if err == nil {
		err = f.File.Sync()
	}
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", f.path, err)
	}
	if err := SyncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("replace %s: %w", f.path, err)
	}
	return nil
}

// Abort drops the replacement. It is safe after Commit (it does nothing).
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	tmp := f.File.Name()
	f.File.Close()
	os.Remove(tmp)
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable. File systems that cannot sync a directory (EINVAL) are
// taken as having nothing to do.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
