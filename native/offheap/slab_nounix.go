//go:build !unix

package offheap

import (
	"fmt"
	"unsafe"
)

// AllocAligned returns size bytes of zeroed Go heap memory starting at an
// address that is a multiple of align (a power of two). On this system the
// memory is not mapped outside the heap; Free only checks its argument.
func AllocAligned(size, align int) ([]byte, error) {
	if _, err := checkAlloc(size, align, 1); err != nil {
		return nil, err
	}
	b := make([]byte, size+align)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & uintptr(align-1))
	return b[skip : skip+size : skip+size], nil
}

// Free releases memory returned by AllocAligned to the garbage collector.
func Free(b []byte) error {
	if cap(b) == 0 {
		return fmt.Errorf("offheap: free: empty slice was not returned by AllocAligned")
	}
	return nil
}

// Discard zeroes memory returned by AllocAligned.
func Discard(b []byte) error {
	clear(b[:cap(b)])
	return nil
}
