package sysinfo

import (
	"errors"
	"fmt"
	"os"
)

// Footprint samples the process's current memory use from
// /proc/self/smaps_rollup (RSS, PSS, anonymous, swap), falling back to
// /proc/self/status on kernels without it.
func Footprint() (FootprintSample, error) {
	const rollup = "/proc/self/smaps_rollup"
	data, err := os.ReadFile(rollup)
	if err == nil {
		v := parseProcKB(data)
		rss, okR := v["Rss"]
		anon, okA := v["Anonymous"]
		if !okR || !okA {
			return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %s lacks Rss or Anonymous", rollup)
		}
		s := FootprintSample{RSS: rss, PSS: v["Pss"], Anon: anon, Swap: v["Swap"], Source: rollup}
		s.Footprint = s.Anon + s.Swap
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %w", err)
	}
	const status = "/proc/self/status"
	data, err = os.ReadFile(status)
	if err != nil {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %w", err)
	}
	v := parseProcKB(data)
	rss, ok := v["VmRSS"]
	if !ok {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %s lacks VmRSS", status)
	}
	s := FootprintSample{RSS: rss, Anon: v["RssAnon"], Swap: v["VmSwap"], Source: status}
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
