package offheap

import (
	"fmt"
	"math/bits"
)

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
