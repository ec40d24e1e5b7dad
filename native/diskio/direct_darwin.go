package diskio

import (
	"os"

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
