//go:build !linux && !darwin

package native

import (
	"errors"
	"fmt"
)

// Footprint is not implemented on this system.
func Footprint() (FootprintSample, error) {
	return FootprintSample{}, fmt.Errorf("native: footprint: %w", errors.ErrUnsupported)
}

// MachineMemory is not implemented on this system.
func MachineMemory() (total, available uint64, err error) {
	return 0, 0, fmt.Errorf("native: machine memory: %w", errors.ErrUnsupported)
}
