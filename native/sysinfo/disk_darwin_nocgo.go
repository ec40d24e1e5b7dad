//go:build darwin && !cgo

package sysinfo

// DiskFree reports the space of the volume that holds path (or its nearest
// existing ancestor) from statfs(2). Built without cgo, it cannot ask for the
// capacity available for important usage, so Important equals Available and
// purgeable space is not counted.
func DiskFree(path string) (DiskSpace, error) {
	dir, err := existingDir(path)
	if err != nil {
		return DiskSpace{}, err
	}
	return statfsSpace(dir)
}
