// Package mempressure owns the system's memory-pressure notifications: a
// Monitor delivers the level (Normal, Warning, Critical) each time it
// changes, so that caches can give memory back before the kernel kills the
// process, and take it again when the pressure ends.
//
// On Linux the levels come from PSI triggers (Documentation/accounting/
// psi.rst) on the memory.pressure file of the process's cgroup v2, else on
// /proc/pressure/memory: Warning when some task stalled on memory for
// WarnStall of a 2-second window, Critical when all non-idle tasks did for
// CritStall, back to Normal after Calm without a trigger. On macOS they
// come from a dispatch memory-pressure source (cgo, pressure_darwin.go).
// Elsewhere, and on macOS without cgo, Start returns an error wrapping
// errors.ErrUnsupported.
//
// It only reports: what gives way is decided by its caller. A Monitor's
// goroutine stops at Close.
package mempressure
