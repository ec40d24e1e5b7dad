// Package offheap owns memory outside the Go heap: aligned slabs mapped
// anonymously (AllocAligned), which can have their pages discarded
// (Discard) and be freed explicitly (Free); and read-only file
// mappings (MapFile, Unmap).
//
// It does not read files into slabs (native/diskio does) or decide how much
// memory to use (engine/plan does). Unix systems map memory with mmap;
// other systems fall back to Go heap memory that the collector frees.
package offheap
