// Package native owns the operating-system services that the streamed expert
// tier needs:
//
//   - positioned and direct reads (O_DIRECT on Linux, F_NOCACHE on macOS) of
//     arbitrary byte ranges through aligned superset reads, and the bounded
//     read worker pool that serves expert misses (read-ahead requests wait
//     behind every other one);
//   - aligned slab memory mapped outside the Go heap, which can be locked,
//     discarded and freed explicitly;
//   - the process memory footprint and the machine's total and available
//     memory;
//   - disk capacity and power (sleep) assertions.
//
// Every service has a real Linux implementation; macOS implementations sit in
// _darwin files (those that need cgo have a !cgo counterpart), and other
// systems get a portable fallback or a clear error wrapping
// errors.ErrUnsupported.
//
// This package must not know about models, tensors, experts or caching
// policy: it moves bytes between files and memory and reports what the
// operating system says. All cgo and system calls of the engine live here
// (and in kernels and app), nowhere else. It keeps no package-level mutable
// state; every goroutine it starts is owned by a value with a Close method.
package native
