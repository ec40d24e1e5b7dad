//go:build unix

package diskio

import (
	"os"
	"syscall"
)

func fileID(fi os.FileInfo) (dev, inode uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
