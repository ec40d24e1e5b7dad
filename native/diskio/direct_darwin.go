package diskio

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openDirect opens path and turns off page caching for the descriptor
// (F_NOCACHE). F_NOCACHE does not evict pages that are already cached, so
// reads of recently written or read data may still be served from memory. It
// reports ok == false, with no error, when the file system refuses F_NOCACHE.
func openDirect(path string) (*os.File, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		_, ferr = unix.FcntlInt(fd, unix.F_NOCACHE, 1)
	}); err != nil {
		f.Close()
		return nil, false, err
	}
	if ferr != nil {
		f.Close()
		return nil, false, nil
	}
	return f, true, nil
}

// WillNeed asks the kernel to start reading [off, off+n) into the page cache
// (fcntl F_RDADVISE on the buffered descriptor). It only helps buffered
// reads: ReadAtBuffered, and ReadAt/ReadAtAligned when Direct is false.
func (f *DirectFile) WillNeed(off, n int64) error {
	if err := f.checkRange(off, n); err != nil {
		return err
	}
	for n > 0 {
		// F_RDADVISE takes a 32-bit count.
		count := min(n, 1<<30)
		ra := unix.Radvisory_t{Offset: off, Count: int32(count)}
		rc, err := f.buffered.SyscallConn()
		if err != nil {
			return fmt.Errorf("diskio: F_RDADVISE %s: %w", f.path, err)
		}
		var errno syscall.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, unix.F_RDADVISE, uintptr(unsafe.Pointer(&ra)))
		}); err != nil {
			return fmt.Errorf("diskio: F_RDADVISE %s: %w", f.path, err)
		}
		if errno != 0 {
			return fmt.Errorf("diskio: F_RDADVISE %s offset %d length %d: %w", f.path, off, count, errno)
		}
		off += count
		n -= count
	}
	return nil
}
