//go:build unix

package offheap

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AllocAligned maps size bytes of zeroed anonymous memory outside the Go heap,
// starting at an address that is a multiple of align (a power of two) and of
// the page size (4 KiB on Linux x86-64, 16 KiB on Apple silicon). The slice
// has length size and capacity size rounded up to the page size. Release it
// with Free; the garbage collector never does. On Linux a mapping of at
// least 2 MiB is aligned to 2 MiB and asks for transparent huge pages.
func AllocAligned(size, align int) ([]byte, error) {
	page := os.Getpagesize()
	length, err := checkAlloc(size, align, page)
	if err != nil {
		return nil, err
	}
	if hugeAlign > 0 && length >= hugeAlign {
		align = max(align, hugeAlign)
	}
	b, err := allocAligned(size, length, align, page)
	if err == nil {
		adviseHuge(b[:cap(b)])
	}
	return b, err
}

func allocAligned(size, length, align, page int) ([]byte, error) {
	if align <= page {
		p, err := mmapAnon(nil, length, 0)
		if err != nil {
			return nil, fmt.Errorf("offheap: allocate %d bytes: mmap: %w", size, err)
		}
		return unsafe.Slice((*byte)(p), length)[:size], nil
	}
	// Map align extra bytes, then unmap the misaligned head and the tail.
	total := length + align
	p, err := mmapAnon(nil, total, 0)
	if err != nil {
		return nil, fmt.Errorf("offheap: allocate %d bytes aligned to %d: mmap: %w", size, align, err)
	}
	base := uintptr(p)
	start := (base + uintptr(align) - 1) &^ uintptr(align-1)
	if head := start - base; head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			return nil, fmt.Errorf("offheap: allocate %d bytes: trim mapping head: %w", size, err)
		}
	}
	if tail := base + uintptr(total) - (start + uintptr(length)); tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(p, start-base+uintptr(length)), tail); err != nil {
			return nil, fmt.Errorf("offheap: allocate %d bytes: trim mapping tail: %w", size, err)
		}
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, start-base)), length)[:size], nil
}

func mmapAnon(addr unsafe.Pointer, length int, flags int) (unsafe.Pointer, error) {
	return unix.MmapPtr(-1, 0, addr, uintptr(length),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|flags)
}

// mapping returns the start and length of the mapping behind a slice
// returned by AllocAligned, or resliced from it starting at index 0.
func mapping(b []byte, op string) (unsafe.Pointer, int, error) {
	page := os.Getpagesize()
	p := unsafe.Pointer(unsafe.SliceData(b))
	if cap(b) == 0 || uintptr(p)%uintptr(page) != 0 || cap(b)%page != 0 {
		return nil, 0, fmt.Errorf("offheap: %s: slice (address %p, capacity %d) was not returned by AllocAligned", op, p, cap(b))
	}
	return p, cap(b), nil
}

// Free unmaps memory returned by AllocAligned. b must be that slice or a
// reslice of it starting at index 0 (the capacity gives the mapping length).
// The memory must not be used afterwards, and must not be freed twice.
func Free(b []byte) error {
	p, n, err := mapping(b, "free")
	if err != nil {
		return err
	}
	if err := unix.MunmapPtr(p, uintptr(n)); err != nil {
		return fmt.Errorf("offheap: free %d bytes at %p: %w", n, p, err)
	}
	return nil
}

// Discard releases the physical pages of memory returned by AllocAligned
// while keeping the address range: the memory reads as zeros afterwards and
// no longer counts toward the process footprint until written again. It
// replaces the range with a fresh anonymous mapping, so a Lock on it ends.
func Discard(b []byte) error {
	p, n, err := mapping(b, "discard")
	if err != nil {
		return err
	}
	q, err := mmapAnon(p, n, unix.MAP_FIXED)
	if err != nil {
		return fmt.Errorf("offheap: discard %d bytes at %p: %w", n, p, err)
	}
	if q != p {
		return fmt.Errorf("offheap: discard %d bytes at %p: kernel remapped to %p", n, p, q)
	}
	adviseHuge(unsafe.Slice((*byte)(p), n))
	return nil
}
