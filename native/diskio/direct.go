package diskio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"
)

// DirectAlign is the alignment, in bytes, of file offsets, lengths and memory
// addresses used for direct reads. 4096 covers the logical block size of every
// disk the engine targets (512 or 4096).
const DirectAlign = 4096

// directChunk is the largest single read issued by the read pool between two
// cancellation checks.
const directChunk = 8 << 20

// ShortReadError reports that a file ended inside a requested byte range.
type ShortReadError struct {
	Path string // file that was read
	Off  int64  // first requested byte
	Want int64  // requested length
	Got  int64  // bytes of the requested range that the file holds
	Size int64  // file size when the error was detected, -1 if unknown
}

func (e *ShortReadError) Error() string {
	return fmt.Sprintf("diskio: short read of %s at offset %d: wanted %d bytes, got %d (file size %d)",
		e.Path, e.Off, e.Want, e.Got, e.Size)
}

// Unwrap returns io.ErrUnexpectedEOF.
func (e *ShortReadError) Unwrap() error { return io.ErrUnexpectedEOF }

// DirectFile is a read-only file opened for positioned reads of known byte
// ranges (tensors located through a header). It holds two descriptors: one
// that bypasses the page cache when the file system allows it (Direct reports
// whether it does), used by ReadAtAligned and ReadAt, and a buffered one used
// by ReadAtBuffered for small reads such as quantization scales.
//
// All methods are safe for concurrent use. Reads ending past the end of the
// file fail with a *ShortReadError, so DirectFile is meant for known extents
// rather than for reading a stream to its end.
type DirectFile struct {
	path     string
	direct   bool
	size     int64
	stamp    Stamp    // when opened
	raw      *os.File // cache-bypassing descriptor, or the buffered one when !direct
	buffered *os.File
}

// OpenDirect opens path for direct reads: O_DIRECT on Linux, F_NOCACHE on
// macOS. When the file system refuses direct I/O (tmpfs, for example) the
// file is opened buffered instead and Direct reports false.
func OpenDirect(path string) (*DirectFile, error) {
	return openFile(path, true)
}

// OpenBuffered opens path like OpenDirect but never asks for direct I/O:
// every read goes through the page cache. Direct reports false.
func OpenBuffered(path string) (*DirectFile, error) {
	return openFile(path, false)
}

func openFile(path string, wantDirect bool) (*DirectFile, error) {
	buffered, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("diskio: open %s: %w", path, err)
	}
	st, err := buffered.Stat()
	if err != nil {
		buffered.Close()
		return nil, fmt.Errorf("diskio: stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		buffered.Close()
		return nil, fmt.Errorf("diskio: open %s: not a regular file (%s)", path, st.Mode().Type())
	}
	f := &DirectFile{path: path, size: st.Size(), stamp: StampOf(st), raw: buffered, buffered: buffered}
	if wantDirect {
		raw, ok, err := openDirect(path)
		if err != nil {
			buffered.Close()
			return nil, fmt.Errorf("diskio: open %s for direct reads: %w", path, err)
		}
		if ok {
			f.raw, f.direct = raw, true
		}
	}
	return f, nil
}

// Path returns the path the file was opened with.
func (f *DirectFile) Path() string { return f.path }

// Direct reports whether ReadAtAligned and ReadAt bypass the page cache.
func (f *DirectFile) Direct() bool { return f.direct }

// Size returns the file size observed when the file was opened.
func (f *DirectFile) Size() int64 { return f.size }

// Stamp returns the file's stamp when it was opened.
func (f *DirectFile) Stamp() Stamp { return f.stamp }

// Changed reports whether the open file's stamp (size, modification
// time) is no longer the one it was opened with: it was written to or
// resized in place since. One fstat; a file replaced by a rename keeps
// the open one's stamp.
func (f *DirectFile) Changed() (bool, error) {
	st, err := f.buffered.Stat()
	if err != nil {
		return false, fmt.Errorf("diskio: stat %s: %w", f.path, err)
	}
	return StampOf(st) != f.stamp, nil
}

// Close closes both descriptors.
func (f *DirectFile) Close() error {
	err := f.buffered.Close()
	if f.direct {
		err = errors.Join(err, f.raw.Close())
	}
	if err != nil {
		return fmt.Errorf("diskio: close %s: %w", f.path, err)
	}
	return nil
}

// AlignedSpan returns the aligned superset of the byte range [off, off+n):
// start is off rounded down to DirectAlign and length is the distance from
// start to off+n rounded up to DirectAlign.
func AlignedSpan(off, n int64) (start, length int64) {
	start = off &^ (DirectAlign - 1)
	end := (off + n + DirectAlign - 1) &^ (DirectAlign - 1)
	return start, end - start
}

// SlabLen returns the slab length that holds the aligned span of n bytes at
// any offset: n plus up to DirectAlign-1 bytes of head, rounded up.
func SlabLen(n int64) int64 {
	return (n + 2*(DirectAlign-1)) &^ (DirectAlign - 1)
}

// IsAligned reports whether b starts at a DirectAlign-aligned address.
func IsAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign == 0
}

// ReadAtAligned reads the byte range [off, off+n) of the file into slab
// without copying: it reads the aligned span (see AlignedSpan) into the start
// of slab and returns the sub-slice of slab that holds exactly the requested
// bytes. slab must start at a DirectAlign-aligned address (AllocAligned
// memory does) and be at least as long as the span; SlabLen(n) is always
// enough. The same rules apply when the file is buffered, so that code tested
// on one path works on the other.
func (f *DirectFile) ReadAtAligned(slab []byte, off, n int64) ([]byte, error) {
	return f.readAligned(slab, off, n, nil)
}

// readAligned is ReadAtAligned with a stop check between chunks of at most
// directChunk bytes; stop may be nil.
func (f *DirectFile) readAligned(slab []byte, off, n int64, stop func() error) ([]byte, error) {
	if n == 0 {
		if err := f.checkRange(off, n); err != nil {
			return nil, err
		}
		return slab[:0], nil
	}
	start, span, err := f.checkSlab(slab, off, n)
	if err != nil {
		return nil, err
	}
	head := off - start
	var got int64
	if f.direct {
		got, err = readFull(f.raw, slab[:span], start, head+n, true, stop)
		got -= head
	} else {
		got, err = readFull(f.raw, slab[head:head+n], off, n, false, stop)
	}
	if err != nil {
		return nil, f.readError(err, off, n, got)
	}
	return slab[head : head+n], nil
}

func (f *DirectFile) checkSlab(slab []byte, off, n int64) (start, span int64, err error) {
	if err := f.checkRange(off, n); err != nil {
		return 0, 0, err
	}
	if !IsAligned(slab) {
		return 0, 0, fmt.Errorf("diskio: read %s at offset %d: slab address %p is not %d-byte aligned",
			f.path, off, unsafe.SliceData(slab), DirectAlign)
	}
	start, span = AlignedSpan(off, n)
	if int64(len(slab)) < span {
		return 0, 0, fmt.Errorf("diskio: read %s at offset %d length %d: slab of %d bytes is shorter than the aligned span of %d bytes",
			f.path, off, n, len(slab), span)
	}
	return start, span, nil
}

func (f *DirectFile) checkRange(off, n int64) error {
	if off < 0 || n < 0 || off > math.MaxInt64-n-2*DirectAlign {
		return fmt.Errorf("diskio: read %s: invalid range offset %d length %d", f.path, off, n)
	}
	return nil
}

// readError turns an error of readFull into the error reported for the
// requested range [off, off+n), of which got bytes were read.
func (f *DirectFile) readError(err error, off, n, got int64) error {
	if errors.Is(err, io.EOF) {
		return &ShortReadError{Path: f.path, Off: off, Want: n, Got: max(got, 0), Size: f.currentSize()}
	}
	return fmt.Errorf("diskio: read %s at offset %d length %d: %w", f.path, off, n, err)
}

func (f *DirectFile) currentSize() int64 {
	st, err := f.buffered.Stat()
	if err != nil {
		return -1
	}
	return st.Size()
}

// ReadAt reads len(p) bytes at off through the cache-bypassing descriptor: it
// reads the aligned span into scratch memory and copies the requested bytes
// into p. It returns the number of bytes copied and, when that is less than
// len(p), a *ShortReadError. For large reads prefer ReadAtAligned, which does
// not copy.
func (f *DirectFile) ReadAt(p []byte, off int64) (int, error) {
	if !f.direct {
		return f.ReadAtBuffered(p, off)
	}
	n := int64(len(p))
	if err := f.checkRange(off, n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	start, span := AlignedSpan(off, n)
	scratch := heapAligned(int(span))
	head := off - start
	got, err := readFull(f.raw, scratch, start, head+n, true, nil)
	got = max(got-head, 0)
	copied := copy(p, scratch[head:head+min(got, n)])
	if err != nil {
		return copied, f.readError(err, off, n, got)
	}
	return copied, nil
}

// ReadAtBuffered reads len(p) bytes at off through the page cache. It returns
// the number of bytes read and, when that is less than len(p), a
// *ShortReadError.
func (f *DirectFile) ReadAtBuffered(p []byte, off int64) (int, error) {
	if err := f.checkRange(off, int64(len(p))); err != nil {
		return 0, err
	}
	got, err := readFull(f.buffered, p, off, int64(len(p)), false, nil)
	if err != nil {
		return int(got), f.readError(err, off, int64(len(p)), got)
	}
	return int(got), nil
}

// heapAligned returns n bytes of Go heap memory starting at a
// DirectAlign-aligned address. The Go collector does not move heap objects,
// so the memory is a valid target for direct reads while referenced.
func heapAligned(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (DirectAlign - 1))
	return b[skip : skip+n : skip+n]
}

// readFull reads into buf from file offset off until at least need bytes are
// in, the whole buffer is filled, or the file ends. For a direct descriptor
// every read starts at an aligned offset, so a read that returns a count that
// is not a multiple of DirectAlign means the end of the file. It returns the
// bytes read and io.EOF when fewer than need bytes could be read. stop, if not
// nil, is called before each read of at most directChunk bytes.
func readFull(file *os.File, buf []byte, off, need int64, direct bool, stop func() error) (int64, error) {
	var got int64
	for got < need {
		if stop != nil {
			if err := stop(); err != nil {
				return got, err
			}
		}
		chunk := buf[got:]
		if stop != nil && len(chunk) > directChunk {
			chunk = chunk[:directChunk]
		}
		n, err := preadFile(file, chunk, off+got)
		if err != nil {
			return got, err
		}
		got += int64(n)
		if n == 0 || (direct && n%DirectAlign != 0) {
			break
		}
	}
	if got < need {
		return got, io.EOF
	}
	return got, nil
}
