package offheap

import (
	"os"
	"strings"
	"testing"
	"unsafe"
)

// testAlign is the alignment of direct reads, which the engine allocates
// most slabs for.
const testAlign = 4096

func TestAllocAligned(t *testing.T) {
	page := os.Getpagesize()
	cases := []struct {
		size, align int
	}{
		{1, 1},
		{100, 64},
		{testAlign, testAlign},
		{testAlign + 1, testAlign},
		{3 << 20, 16 << 10},
		{5000, 1 << 21},
	}
	for _, c := range cases {
		b, err := AllocAligned(c.size, c.align)
		if err != nil {
			t.Fatalf("AllocAligned(%d, %d): %v", c.size, c.align, err)
		}
		addr := uintptr(unsafe.Pointer(&b[0]))
		if addr%uintptr(c.align) != 0 || addr%uintptr(page) != 0 {
			t.Errorf("AllocAligned(%d, %d) at %#x: not aligned", c.size, c.align, addr)
		}
		wantCap := (c.size + page - 1) &^ (page - 1)
		if len(b) != c.size || cap(b) != wantCap {
			t.Errorf("AllocAligned(%d, %d): len %d cap %d, want %d %d", c.size, c.align, len(b), cap(b), c.size, wantCap)
		}
		full := b[:cap(b)]
		for i := 0; i < len(full); i += page {
			if full[i] != 0 {
				t.Fatalf("AllocAligned(%d, %d): byte %d not zero", c.size, c.align, i)
			}
			full[i] = 0xA5
		}
		full[len(full)-1] = 0x5A
		if err := Discard(b); err != nil {
			t.Fatalf("Discard: %v", err)
		}
		if full[0] != 0 || full[len(full)-1] != 0 {
			t.Errorf("AllocAligned(%d, %d): memory not zero after Discard", c.size, c.align)
		}
		if err := Free(b[:1]); err != nil {
			t.Fatalf("Free: %v", err)
		}
	}
}

func TestAllocAlignedRejectsBadArguments(t *testing.T) {
	cases := []struct {
		size, align int
		want        string
	}{
		{0, 4096, "size must be positive"},
		{-5, 4096, "size must be positive"},
		{4096, 0, "not a power of two"},
		{4096, 3, "not a power of two"},
		{4096, -4096, "not a power of two"},
		{1 << 62, 4096, "too large"},
	}
	for _, c := range cases {
		if _, err := AllocAligned(c.size, c.align); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AllocAligned(%d, %d): error %v, want one containing %q", c.size, c.align, err, c.want)
		}
	}
}

func TestFreeRejectsForeignSlices(t *testing.T) {
	b, err := AllocAligned(2*os.Getpagesize(), testAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(b)
	for name, s := range map[string][]byte{
		"nil":        nil,
		"heap":       make([]byte, 100),
		"resliced":   b[1:],
		"odd length": b[:cap(b)-1][: 1 : cap(b)-1],
	} {
		if err := Free(s); err == nil || !strings.Contains(err.Error(), "not returned by AllocAligned") {
			t.Errorf("Free(%s): error %v", name, err)
		}
		if err := Discard(s); err == nil {
			t.Errorf("Discard(%s): no error", name)
		}
	}
}

// TestAllocHugeAligned: where the system has transparent huge pages, a
// mapping of at least one huge page starts on a huge page boundary (so
// that whole huge pages fit in it), smaller ones keep the alignment asked
// for, and a discarded mapping stays usable.
func TestAllocHugeAligned(t *testing.T) {
	if hugeAlign == 0 {
		t.Log("no huge page hint on this system: alignment as asked for")
	}
	for _, size := range []int{hugeAlign + 12345, 3*hugeAlign + 1, 19 << 20} {
		b, err := AllocAligned(size, testAlign)
		if err != nil {
			t.Fatal(err)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if want := uintptr(max(hugeAlign, testAlign)); addr%want != 0 || len(b) != size {
			t.Errorf("size %d: address %#x, length %d; want a multiple of %d and length %d", size, addr, len(b), want, size)
		}
		b[0], b[size-1] = 1, 2
		if err := Discard(b); err != nil {
			t.Fatal(err)
		}
		if b[0] != 0 || b[size-1] != 0 {
			t.Errorf("size %d: discarded memory reads %d %d, want zeros", size, b[0], b[size-1])
		}
		b[size/2] = 3
		if err := Free(b); err != nil {
			t.Fatal(err)
		}
	}
}
