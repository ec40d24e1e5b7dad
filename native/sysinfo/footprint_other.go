//go:build !linux && !darwin

package sysinfo

import (
	"errors"
	"fmt"
)

// Footprint is unsupported on this system (no such OS service here).
func Footprint() (FootprintSample, error) {
	return FootprintSample{}, fmt.Errorf("sysinfo: footprint: %w", errors.ErrUnsupported)
}

// MachineMemory is unsupported on this system (no such OS service here).
func MachineMemory() (total, available uint64, err error) {
	return 0, 0, fmt.Errorf("sysinfo: machine memory: %w", errors.ErrUnsupported)
}
