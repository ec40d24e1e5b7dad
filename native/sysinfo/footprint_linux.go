package sysinfo

import (
	"fmt"
	"os"
)

// Footprint samples the process's current memory use from the kernel's
// counters in /proc/self/status (VmRSS, RssAnon, VmSwap). It does not read /proc/self/smaps_rollup, whose figures are the
// same sums: building them walks every page table of the process under its
// memory-map lock, some 10 ms for tens of GB resident, and every mmap or
// munmap in the process (a thread's stack, a driver's buffer) waits for
// that, with the page faults queued behind it. Sampled every 100 ms by
// spool bench prefill, it made the GPU prefill four times slower.
func Footprint() (FootprintSample, error) {
	const status = "/proc/self/status"
	data, err := os.ReadFile(status)
	if err != nil {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %w", err)
	}
	v := parseProcKB(data)
	rss, okR := v["VmRSS"]
	anon, okA := v["RssAnon"]
	if !okR || !okA {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %s lacks VmRSS or RssAnon", status)
	}
	s := FootprintSample{RSS: rss, Anon: anon, Swap: v["VmSwap"], Source: status}
	s.Footprint = s.Anon + s.Swap
	return s, nil
}

// MachineMemory returns the machine's total memory and the memory available
// to new work without swapping (MemTotal and MemAvailable of /proc/meminfo),
// in bytes.
func MachineMemory() (total, available uint64, err error) {
	const meminfo = "/proc/meminfo"
	data, err := os.ReadFile(meminfo)
	if err != nil {
		return 0, 0, fmt.Errorf("sysinfo: machine memory: %w", err)
	}
	v := parseProcKB(data)
	total, okT := v["MemTotal"]
	available, okA := v["MemAvailable"]
	if !okT || !okA {
		return 0, 0, fmt.Errorf("sysinfo: machine memory: %s lacks MemTotal or MemAvailable", meminfo)
	}
	return total, available, nil
}
