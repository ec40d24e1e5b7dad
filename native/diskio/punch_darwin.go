package diskio

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// punch issues F_PUNCHHOLE. Its argument, struct fpunchhole (u32 flags,
// u32 reserved, off_t offset, off_t length), is the first 24 bytes of
// struct fstore, which x/sys/unix passes for F_PREALLOCATE: the same call
// with the fields that matter.
func punch(f *os.File, off, n int64) error {
	arg := unix.Fstore_t{Offset: off, Length: n}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.FcntlFstore(fd, unix.F_PUNCHHOLE, &arg) }); cerr != nil {
		return cerr
	}
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) && !isAPFS(f) {
		return ErrPunchUnsupported
	}
	return err
}

func isAPFS(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return unix.ByteSliceToString(st.Fstypename[:]) == "apfs"
}

// blockSize is the file system's allocation unit for f.
func blockSize(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return max(int64(st.Bsize), 512), nil
}
