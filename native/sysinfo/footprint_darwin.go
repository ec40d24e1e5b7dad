package sysinfo

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// MachineMemory returns the machine's total memory (sysctl hw.memsize) and
// the memory available to new work without swapping, in bytes (see
// availableMemory for how it is counted).
func MachineMemory() (total, available uint64, err error) {
	total, err = unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, 0, fmt.Errorf("sysinfo: machine memory: sysctl hw.memsize: %w", err)
	}
	available, err = availableMemory()
	if err != nil {
		return 0, 0, fmt.Errorf("sysinfo: machine memory: %w", err)
	}
	return total, min(available, total), nil
}
