package download

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spoolhq/spool/native/diskio"
)

// PartialFile is a partial blob open for positioned writes and reads.
type PartialFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (fs.FileInfo, error)
	Close() error
}

// Storage opens partial blobs. Tests put a Storage in front of the OS to
// inject failures such as a full disk.
type Storage interface {
	// OpenPartial opens path for reading and writing, creating it if needed
	// and keeping its contents.
	OpenPartial(path string) (PartialFile, error)
}

// OSStorage opens partial blobs as ordinary files.
type OSStorage struct{}

// OpenPartial opens path read-write, creating it with mode 0644. On macOS
// the file's data is kept out of the buffer cache (diskio.WriteThrough); that
// hint failing is not an error.
func (OSStorage) OpenPartial(path string) (PartialFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	diskio.WriteThrough(f)
	return f, nil
}

// DiskFullError reports that the volume filled up while a blob was written.
// Everything checkpointed before it is kept.
type DiskFullError struct {
	Path string // the file being written
	Kept int64  // bytes kept for the next run (complete blobs and checkpointed ranges)
	Left int64  // bytes still to download
	Free int64  // bytes to free for the rest and the reserve, beyond what is free now
	Err  error
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("disk full while writing %s: stopped cleanly, keeping %s already on disk with %s still to download; "+
		"free at least %s more (or set HF_HUB_CACHE to a larger volume) and run again to resume: %v",
		e.Path, FormatBytes(e.Kept), FormatBytes(e.Left), FormatBytes(e.toFree()), e.Err)
}

// toFree is the space to free: what the volume lacks, or, when free space
// could not be measured (or looks ample), the bytes left.
func (e *DiskFullError) toFree() int64 {
	if e.Free > 0 {
		return e.Free
	}
	return e.Left
}

// Unwrap returns ErrDiskFull and the underlying error.
func (e *DiskFullError) Unwrap() []error { return []error{ErrDiskFull, e.Err} }

// IntegrityError reports a blob that failed verification more times than
// allowed. The bad bytes were deleted; nothing was published.
type IntegrityError struct {
	Path     string
	Want     string // expected hash
	Got      string // hash of the bytes received
	Attempts int
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("%s failed verification %d times (expected %s, got %s); the bad bytes were deleted. "+
		"The hub may be serving a broken file; try again later", e.Path, e.Attempts, e.Want, e.Got)
}

// Unwrap returns ErrIntegrity.
func (e *IntegrityError) Unwrap() error { return ErrIntegrity }

// writeError marks a failure to write or sync a partial blob (not retried).
type writeError struct {
	path string
	err  error
}

func (e *writeError) Error() string { return fmt.Sprintf("write %s: %v", e.path, e.err) }
func (e *writeError) Unwrap() error { return e.err }
