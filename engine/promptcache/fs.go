package promptcache

import (
	"io/fs"
	"os"
	"time"

	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/sysinfo"
)

// FS is what the disk tier changes on the file system: it creates, renames
// and removes block files and directories. Reads of block files do not go
// through it; they take diskio's direct-read path. Tests put faults (a
// full disk) in front of OS.
type FS interface {
	MkdirAll(dir string) error
	// CreateTemp creates a new file in dir for writing (see os.CreateTemp).
	CreateTemp(dir, pattern string) (File, error)
	Rename(from, to string) error
	// SyncDir makes the entries renamed into dir durable
	// (atomicfile.SyncDir).
	SyncDir(dir string) error
	Remove(path string) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Chtimes sets a file's modification time, which keeps its recency
	// across restarts.
	Chtimes(path string, mtime time.Time) error
	// Available is the space an unprivileged user may still write on the
	// volume that holds dir.
	Available(dir string) (int64, error)
}

// File is a file being written.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
	Name() string
}

// OS is the operating system's file system.
type OS struct{}

// MkdirAll implements FS. The directories are the user's alone (0700):
// block files hold prompts' token ids and state (os.CreateTemp makes them
// 0600).
func (OS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

// CreateTemp implements FS. On macOS the file's data is kept out of the
// buffer cache (diskio.WriteThrough): a block is read back, if ever, with a
// direct read.
func (OS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	diskio.WriteThrough(f)
	return f, nil
}

// Rename implements FS.
func (OS) Rename(from, to string) error { return os.Rename(from, to) }

// SyncDir implements FS.
func (OS) SyncDir(dir string) error { return atomicfile.SyncDir(dir) }

// Remove implements FS.
func (OS) Remove(path string) error { return os.Remove(path) }

// ReadDir implements FS.
func (OS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }

// Chtimes implements FS.
func (OS) Chtimes(path string, mtime time.Time) error { return os.Chtimes(path, time.Time{}, mtime) }

// Available implements FS.
func (OS) Available(dir string) (int64, error) {
	sp, err := sysinfo.DiskFree(dir)
	if err != nil {
		return 0, err
	}
	return int64(min(sp.Available, 1<<62)), nil
}
