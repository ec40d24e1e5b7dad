//go:build unix && !linux

package offheap

// hugeAlign is 0 where there is no huge page hint to give: mappings keep
// the alignment asked for.
const hugeAlign = 0

// adviseHuge does nothing here (macOS has no transparent huge page hint;
// Apple silicon's 16 KiB pages already fault four times less than 4 KiB).
func adviseHuge([]byte) {}
