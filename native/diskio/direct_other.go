//go:build !linux && !darwin

package diskio

import "os"

// openDirect reports that direct I/O is not available on this system; files
// are read through the page cache.
func openDirect(path string) (*os.File, bool, error) {
	return nil, false, nil
}
