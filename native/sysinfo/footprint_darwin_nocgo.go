//go:build darwin && !cgo

package sysinfo

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Footprint needs task_info, which is reachable only through cgo.
func Footprint() (FootprintSample, error) {
	return FootprintSample{}, fmt.Errorf("sysinfo: footprint: task_info needs a cgo build: %w", errors.ErrUnsupported)
}

// availableMemory counts free and purgeable pages (sysctl
// vm.page_free_count, vm.page_purgeable_count). Without cgo the inactive page
// count is not reachable, so this is a lower bound of what the cgo build
// reports.
func availableMemory() (uint64, error) {
	free, err := unix.SysctlUint32("vm.page_free_count")
	if err != nil {
		return 0, fmt.Errorf("sysctl vm.page_free_count: %w", err)
	}
	purgeable, err := unix.SysctlUint32("vm.page_purgeable_count")
	if err != nil {
		return 0, fmt.Errorf("sysctl vm.page_purgeable_count: %w", err)
	}
	return (uint64(free) + uint64(purgeable)) * uint64(os.Getpagesize()), nil
}
