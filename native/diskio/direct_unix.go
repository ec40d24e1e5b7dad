//go:build unix

package diskio

import (
	"os"

	"golang.org/x/sys/unix"
)

// preadFile performs one pread(2) at off, retrying reads interrupted by
// signals. It returns 0 bytes and no error at the end of the file.
func preadFile(file *os.File, p []byte, off int64) (int, error) {
	rc, err := file.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	cerr := rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Pread(int(fd), p, off)
			if rerr != unix.EINTR {
				return true
			}
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if rerr != nil {
		return 0, rerr
	}
	return max(n, 0), nil
}
