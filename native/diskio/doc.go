// Package diskio owns reading and writing files the way the engine's
// streamed tiers need:
//
//   - positioned reads of known byte ranges (DirectFile): direct reads that
//     bypass the page cache (O_DIRECT on Linux, F_NOCACHE on macOS) through
//     aligned superset reads, and buffered reads for small ranges;
//   - the alignment contract of those reads (DirectAlign, AlignedSpan,
//     SlabLen, IsAligned);
//   - the bounded read worker pool that serves expert misses (ReadPool;
//     read-ahead requests wait behind every other one);
//   - write-through files (WriteThrough) and advisory cross-process file
//     locks (LockFile, and TryLock on an open file).
//
// It does not allocate the memory it reads into (native/offheap does) and
// knows nothing about models, tensors, experts or caching policy: it moves
// bytes between files and memory. Linux has a real implementation of every
// service, macOS code sits in _darwin files, and other systems get a
// portable fallback. The package keeps no package-level mutable state; the
// goroutines of a ReadPool stop when it is closed.
package diskio
