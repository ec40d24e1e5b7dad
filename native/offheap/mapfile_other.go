//go:build !unix

package offheap

import (
	"fmt"
	"io"
	"os"
)

// MapFile reads the whole of f into memory (this system has no mmap
// support here); Unmap lets the collector have it.
func MapFile(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("offheap: map %s: %w", f.Name(), err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("offheap: map %s: %w", f.Name(), err)
	}
	return b, nil
}

// Unmap releases a mapping made by MapFile.
func Unmap(b []byte) error { return nil }
