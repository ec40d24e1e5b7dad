//go:build !linux && !darwin

package diskio

import "os"

// openDirect reports that direct I/O is not available on this system; files
// are read through the page cache.
func openDirect(path string) (*os.File, bool, error) {
	return nil, false, nil
}

// WillNeed does nothing on this system: it has no read-ahead hint that the
// package uses. It validates the range like the other implementations.
func (f *DirectFile) WillNeed(off, n int64) error {
	return f.checkRange(off, n)
}
