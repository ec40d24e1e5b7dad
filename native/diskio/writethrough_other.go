//go:build !darwin

package diskio

import "os"

// WriteThrough does nothing outside macOS: Linux has no per-descriptor
// switch to keep written data out of the page cache short of O_DIRECT, which
// needs aligned buffers, and its page cache already favours re-read pages
// over written-once ones.
func WriteThrough(f *os.File) error { return nil }
