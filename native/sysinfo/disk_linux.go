package sysinfo

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DiskFree reports the space of the volume that holds path (or its nearest
// existing ancestor). On Linux it is statfs(2): Available is f_bavail, the
// blocks an unprivileged user may still allocate, and Important equals it.
func DiskFree(path string) (DiskSpace, error) {
	dir, err := existingDir(path)
	if err != nil {
		return DiskSpace{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return DiskSpace{}, fmt.Errorf("sysinfo: statfs %s: %w", dir, err)
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	avail := st.Bavail * unit
	return DiskSpace{Path: dir, Total: st.Blocks * unit, Available: avail, Important: avail}, nil
}
