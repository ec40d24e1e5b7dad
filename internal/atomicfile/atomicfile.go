package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/native/diskio"
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

// Create starts a replacement for path in path's directory. Its
// temporary file is locked while it is written (until Commit or Abort, or
// the process's end), so that Sweep leaves it alone; leftovers of earlier
// replacements of path are swept first.
func Create(path string, perm os.FileMode) (*File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", path, err)
	}
	Sweep(path)
	for try := 0; ; try++ {
		f, err := os.CreateTemp(dir, tempPrefix(path)+"*"+tempSuffix)
		if err != nil {
			return nil, fmt.Errorf("create temporary file for %s: %w", path, err)
		}
		// A sweep between its creation and its lock may have taken it:
		// then it is made again. Where files cannot be locked, Sweep
		// removes nothing, and the file is used unlocked.
		ok, err := diskio.TryLock(f)
		if err != nil || (ok && sameFile(f)) || try == 8 {
			return &File{File: f, path: path, perm: perm}, nil
		}
		name := f.Name()
		f.Close()
		os.Remove(name)
	}
}

// The temporary file of a replacement of path is named
// "." + base + "." + random digits + ".tmp", in path's directory.
const tempSuffix = ".tmp"

func tempPrefix(path string) string { return "." + filepath.Base(path) + "." }

// sameFile reports whether f's name still names f.
func sameFile(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}

// Sweep removes the temporary files that replacements of path left
// behind when their process died before Commit or Abort (a kill, a power
// cut): every owner of an atomic write calls it when it starts, and
// Create does before each write. A temporary file still being written,
// by this process or another, is locked and left alone; where the system
// cannot lock files, none is removed. It returns the paths removed.
func Sweep(path string) ([]string, error) {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("sweep %s: %w", path, err)
	}
	var removed []string
	for _, e := range ents {
		name := e.Name()
		mid, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if mid, ok = strings.CutSuffix(mid, tempSuffix); !ok || mid == "" || strings.Trim(mid, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		tmp := filepath.Join(dir, name)
		if orphaned(tmp) && os.Remove(tmp) == nil {
			removed = append(removed, tmp)
		}
	}
	return removed, nil
}

// orphaned reports whether no one holds the lock of the temporary file
// at path (no writer is alive).
func orphaned(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	ok, err := diskio.TryLock(f)
	return ok && err == nil
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
