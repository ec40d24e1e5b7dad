// Package sysinfo owns what the operating system says about this process and
// machine: the process memory footprint (Footprint, PeakRSS), its CPU time
// (ProcessCPUTime), the machine's total and available memory
// (MachineMemory), the space on the volume that holds a path (DiskFree)
// and whether an error is that volume being full (IsDiskFull).
//
// It only reports: it changes nothing and decides nothing (engine/plan and
// the experts footprint guard act on its numbers). Linux reads /proc and
// statfs, macOS asks the kernel through cgo in _darwin files (each with a
// !cgo counterpart), and other systems get a clear error wrapping
// errors.ErrUnsupported or a zero value where documented.
package sysinfo
