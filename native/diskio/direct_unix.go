//go:build unix

package diskio

import (
	"os"

	"golang.org/x/sys/unix"
)

// preadFile performs one pread(2) at off, retrying reads interrupted by
// signals. It returns 0 bytes and no error at the end of the file.
//
// The descriptor is borrowed with RawConn.Control, which only holds a
// reference to it, never RawConn.Read: Read takes the descriptor's read
// lock, one reader at a time, so every worker reading one shard would
// queue behind the others and a pool of 40 would put one request at a
// time to the disk (TestPreadFileReadsConcurrently). A positioned read
// needs no lock: it moves no file offset.
func preadFile(file *os.File, p []byte, off int64) (int, error) {
	rc, err := file.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			n, rerr = unix.Pread(int(fd), p, off)
			if rerr != unix.EINTR {
				return
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
