package diskio

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens path with O_DIRECT. It reports ok == false, with no error,
// when the file system refuses O_DIRECT or keeps files in memory anyway
// (tmpfs, ramfs), where bypassing the page cache means nothing.
func openDirect(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, false, nil
		}
		return nil, false, err
	}
	inMemory, err := inMemoryFS(f)
	if err != nil {
		f.Close()
		return nil, false, err
	}
	if inMemory {
		f.Close()
		return nil, false, nil
	}
	return f, true, nil
}

// inMemoryFS reports whether f lives on a file system without a backing
// device.
func inMemoryFS(f *os.File) (bool, error) {
	var st unix.Statfs_t
	if err := fstatfs(f, &st); err != nil {
		return false, fmt.Errorf("fstatfs: %w", err)
	}
	switch st.Type {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return true, nil
	}
	return false, nil
}

func fstatfs(f *os.File, st *unix.Statfs_t) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), st) }); err != nil {
		return err
	}
	return serr
}
