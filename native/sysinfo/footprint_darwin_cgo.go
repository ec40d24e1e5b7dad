//go:build darwin && cgo

package sysinfo

/*
#include <mach/mach.h>

static kern_return_t spool_task_vm_info(task_vm_info_data_t *info) {
	mach_msg_type_number_t count = TASK_VM_INFO_COUNT;
	return task_info(mach_task_self(), TASK_VM_INFO, (task_info_t)info, &count);
}

static kern_return_t spool_vm_stats(vm_statistics64_data_t *vm, vm_size_t *page) {
	mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
	mach_port_t host = mach_host_self();
	kern_return_t kr = host_page_size(host, page);
	if (kr == KERN_SUCCESS) {
		kr = host_statistics64(host, HOST_VM_INFO64, (host_info64_t)vm, &count);
	}
	mach_port_deallocate(mach_task_self(), host);
	return kr;
}
*/
import "C"

import "fmt"

// Footprint samples the process's current memory use with task_info
// TASK_VM_INFO: Footprint is phys_footprint, RSS resident_size, Anon the
// internal pages and Swap the compressed pages.
func Footprint() (FootprintSample, error) {
	var info C.task_vm_info_data_t
	if kr := C.spool_task_vm_info(&info); kr != C.KERN_SUCCESS {
		return FootprintSample{}, fmt.Errorf("sysinfo: footprint: task_info TASK_VM_INFO failed (kern_return %d)", int(kr))
	}
	return FootprintSample{
		Footprint: uint64(info.phys_footprint),
		RSS:       uint64(info.resident_size),
		Anon:      uint64(info.internal),
		Swap:      uint64(info.compressed),
		Source:    "task_info TASK_VM_INFO",
	}, nil
}

// availableMemory counts free, inactive and purgeable pages
// (host_statistics64 HOST_VM_INFO64); free pages include speculative ones.
func availableMemory() (uint64, error) {
	var vm C.vm_statistics64_data_t
	var page C.vm_size_t
	if kr := C.spool_vm_stats(&vm, &page); kr != C.KERN_SUCCESS {
		return 0, fmt.Errorf("host_statistics64 HOST_VM_INFO64 failed (kern_return %d)", int(kr))
	}
	pages := uint64(vm.free_count) + uint64(vm.inactive_count) + uint64(vm.purgeable_count)
	return pages * uint64(page), nil
}
