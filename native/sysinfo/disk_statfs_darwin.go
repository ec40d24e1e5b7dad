package sysinfo

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfsSpace is the statfs(2) view of the volume that holds dir; Important
// is set equal to Available.
func statfsSpace(dir string) (DiskSpace, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return DiskSpace{}, fmt.Errorf("sysinfo: statfs %s: %w", dir, err)
	}
	unit := uint64(st.Bsize)
	avail := st.Bavail * unit
	return DiskSpace{Path: dir, Total: st.Blocks * unit, Available: avail, Important: avail}, nil
}
