//go:build darwin && cgo

package sysinfo

/*
#cgo LDFLAGS: -framework CoreFoundation
#include <CoreFoundation/CoreFoundation.h>
#include <stdlib.h>
#include <string.h>

// spool_important_capacity stores in *out the volume's available capacity for
// important usage (bytes, purgeable space included) for the directory path.
// It returns 0 on success and -1 if the system did not report it.
static int spool_important_capacity(const char *path, long long *out) {
	CFURLRef url = CFURLCreateFromFileSystemRepresentation(NULL, (const UInt8 *)path, (CFIndex)strlen(path), true);
	if (url == NULL) {
		return -1;
	}
	CFNumberRef num = NULL;
	Boolean ok = CFURLCopyResourcePropertyForKey(url, kCFURLVolumeAvailableCapacityForImportantUsageKey, &num, NULL);
	CFRelease(url);
	if (!ok || num == NULL) {
		return -1;
	}
	SInt64 v = 0;
	Boolean got = CFNumberGetValue(num, kCFNumberSInt64Type, &v);
	CFRelease(num);
	if (!got || v < 0) {
		return -1;
	}
	*out = (long long)v;
	return 0;
}
*/
import "C"

import "unsafe"

// DiskFree reports the space of the volume that holds path (or its nearest
// existing ancestor). Total and Available come from statfs(2); Important is
// NSURLVolumeAvailableCapacityForImportantUsageKey, which counts purgeable
// space that macOS frees for a user-requested download. If the system does
// not report it, Important equals Available.
func DiskFree(path string) (DiskSpace, error) {
	dir, err := existingDir(path)
	if err != nil {
		return DiskSpace{}, err
	}
	ds, err := statfsSpace(dir)
	if err != nil {
		return DiskSpace{}, err
	}
	cpath := C.CString(dir)
	defer C.free(unsafe.Pointer(cpath))
	var important C.longlong
	if C.spool_important_capacity(cpath, &important) != 0 {
		return ds, nil
	}
	ds.Important = uint64(important)
	if ds.Important < ds.Available {
		// The key never reports less than what can be written now.
		ds.Important = ds.Available
	}
	return ds, nil
}
