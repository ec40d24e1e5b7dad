package sysinfo

// DiskSpace is what the operating system says about the volume that holds a
// path, in bytes.
type DiskSpace struct {
	// Path is the existing directory that was asked about: the requested path
	// or its nearest existing ancestor.
	Path string
	// Total is the volume's capacity.
	Total uint64
	// Available is what an unprivileged user can write right now (statfs
	// f_bavail times the fragment size). It leaves out purgeable space.
	Available uint64
	// Important is the space available for a user-requested ("important")
	// download. On macOS it counts purgeable space that the system frees on
	// demand (NSURLVolumeAvailableCapacityForImportantUsageKey) and can be far
	// larger than Available; elsewhere it equals Available.
	Important uint64
}
