//go:build unix

package offheap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MapFile maps the whole of f read-only and shared: reads of the slice
// fault pages in from the page cache, with no copy and no zeroing. The
// mapping outlives f's descriptor; release it with Unmap. Writing to the
// slice faults.
func MapFile(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("offheap: map %s: %w", f.Name(), err)
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, fmt.Errorf("offheap: map %s: %d bytes do not fit the address space", f.Name(), st.Size())
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED|mapPopulate)
	if err != nil {
		return nil, fmt.Errorf("offheap: map %s: mmap: %w", f.Name(), err)
	}
	return b, nil
}

// Unmap releases a mapping made by MapFile.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("offheap: unmap: %w", err)
	}
	return nil
}
