//go:build unix && !linux

package offheap

// mapPopulate is 0 where mmap has no populate flag.
const mapPopulate = 0
