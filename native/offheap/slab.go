package offheap

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrLockLimit is wrapped by Lock errors caused by the locked-memory limit
// (RLIMIT_MEMLOCK, or the wired-memory limit on macOS).
var ErrLockLimit = errors.New("locked-memory limit reached")

// checkAlloc validates the arguments of AllocAligned and returns the mapping
// length: size rounded up to the page size.
func checkAlloc(size, align, page int) (int, error) {
	if size <= 0 {
		return 0, fmt.Errorf("offheap: allocate %d bytes: size must be positive", size)
	}
	if align <= 0 || bits.OnesCount(uint(align)) != 1 {
		return 0, fmt.Errorf("offheap: allocate %d bytes: alignment %d is not a power of two", size, align)
	}
	if size > maxSlab-page {
		return 0, fmt.Errorf("offheap: allocate %d bytes: size too large", size)
	}
	return (size + page - 1) &^ (page - 1), nil
}

// maxSlab bounds one allocation well below the address space so that the
// arithmetic on lengths cannot overflow.
const maxSlab = 1 << 46

// byteLen formats a byte count for error messages.
func byteLen(n uint64) string {
	switch {
	case n == ^uint64(0):
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
