package offheap

import "golang.org/x/sys/unix"

// hugeAlign is the alignment AllocAligned gives mappings of at least that
// size: a transparent huge page's (2 MiB on x86-64 and arm64 Linux), so
// that whole huge pages fit in them.
const hugeAlign = 2 << 20

// adviseHuge asks for transparent huge pages on b (where the system's
// setting is "madvise", as Debian's is): a slab or arena is first touched
// by one large read, which costs one fault per 2 MiB instead of one per
// 4 KiB, and the products that stream through it miss the TLB far less.
// It is a hint: an error leaves the mapping on small pages, as before.
func adviseHuge(b []byte) {
	if len(b) >= hugeAlign {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
}
