package diskio

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func punch(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	}); cerr != nil {
		return cerr
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return ErrPunchUnsupported
	}
	return err
}

// blockSize is the file system's allocation unit for f.
func blockSize(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := fstatfs(f, &st); err != nil {
		return 0, err
	}
	return max(int64(st.Bsize), 512), nil
}
