// The Vulkan host of the GPU backend: device selection, buffers, compute
// pipelines and one command stream. The loader is opened with dlopen, so a
// machine without Vulkan runs the CPU path instead of failing to start.
#ifndef SPOOL_VK_H
#define SPOOL_VK_H

#include <stddef.h>
#include <stdint.h>

typedef struct spool_vk spool_vk;
typedef struct spool_vk_buffer spool_vk_buffer;

typedef struct {
	char name[256];
	char driver[256];
	uint32_t api_version, driver_version, vendor_id, device_id;
	int device_type;             // VkPhysicalDeviceType
	int unified;                 // device memory is host memory (integrated GPU, CPU device)
	int host_import;             // VK_EXT_external_memory_host is enabled
	int portability;             // VK_KHR_portability_subset (MoltenVK) is enabled
	uint64_t import_align;       // minImportedHostPointerAlignment
	uint64_t device_local_bytes; // the largest device-local heap
	uint64_t max_storage_range;  // maxStorageBufferRange
	uint64_t max_alloc;          // maxMemoryAllocationSize
	uint64_t storage_align;      // minStorageBufferOffsetAlignment
	uint32_t max_wg_count[3];
	uint32_t max_shared;     // maxComputeSharedMemorySize
	uint32_t max_invocations; // maxComputeWorkGroupInvocations
	uint32_t devices;        // physical devices the loader listed
	uint32_t index;          // the one in use
} spool_vk_info;

enum {
	SPOOL_MEM_DEVICE = 0,   // device-local, not mapped
	SPOOL_MEM_UPLOAD = 1,   // host-visible, coherent, written by the host
	SPOOL_MEM_READBACK = 2, // host-visible, coherent (cached where offered), read by the host
	SPOOL_MEM_MAPPED = 3,   // device-local and host-visible, coherent, written by the host (fails where none is)
};

// One storage-buffer binding of a dispatch.
typedef struct {
	spool_vk_buffer *buf;
	uint64_t offset, range;
} spool_vk_bind;

// Open loads the Vulkan loader (loader: a path or library name), creates an
// instance and a device with one compute queue. device_index < 0 picks the
// best device (discrete, then integrated, then virtual, then CPU).
int spool_vk_open(const char *loader, int device_index, spool_vk **out, char *err, size_t errlen);
void spool_vk_close(spool_vk *v);
void spool_vk_get_info(spool_vk *v, spool_vk_info *info);
const char *spool_vk_last_error(spool_vk *v);

// Buffers. mapped receives the host address of UPLOAD and READBACK buffers.
int spool_vk_buffer_create(spool_vk *v, uint64_t size, int kind, spool_vk_buffer **out, void **mapped);
// Import wraps host memory [ptr, ptr+size) (both aligned to import_align)
// as a storage buffer without copying.
int spool_vk_buffer_import(spool_vk *v, void *ptr, uint64_t size, spool_vk_buffer **out);
void spool_vk_buffer_destroy(spool_vk *v, spool_vk_buffer *b);

// Pipelines: a compute shader with nbind storage buffers, push constants
// of at most 128 bytes and nspec uint32 specialization constants (ids 0..).
int spool_vk_pipeline(spool_vk *v, const uint32_t *code, size_t code_bytes, int nbind,
                      const uint32_t *spec, int nspec, int *out_id);

// The command stream: commands are recorded into one command buffer and
// run by spool_vk_submit, which waits for them. Recording starts on the
// first command. A dispatch that finds the descriptor pool full submits
// what was recorded and continues in a fresh command buffer.
int spool_vk_copy(spool_vk *v, spool_vk_buffer *src, uint64_t src_off, spool_vk_buffer *dst, uint64_t dst_off, uint64_t n);
int spool_vk_fill(spool_vk *v, spool_vk_buffer *dst, uint64_t off, uint64_t n, uint32_t value);
int spool_vk_dispatch(spool_vk *v, int pipeline, const spool_vk_bind *binds, int nbind,
                      const void *push, uint32_t push_len, uint32_t gx, uint32_t gy, uint32_t gz);
// Barrier makes every earlier write visible to every later command.
int spool_vk_barrier(spool_vk *v);
// Submit runs what was recorded and waits for it and for every earlier
// submission.
int spool_vk_submit(spool_vk *v);
// Submit_async submits what was recorded without waiting and returns its
// sequence number (the latest one when nothing was recorded); recording
// goes on in the other command buffer, which first waits for its own
// previous submission. Work recorded after it that depends on it must
// start with a barrier (same queue: the barrier orders it after every
// earlier submission).
int spool_vk_submit_async(spool_vk *v, uint64_t *seq);
// Wait waits for the submissions numbered up to seq.
int spool_vk_wait(spool_vk *v, uint64_t seq);
// Busy reports whether a submission is still running on the device.
int spool_vk_busy(spool_vk *v);

// Stage copies n host bytes to dst at dst_off through the internal staging
// ring: memcpy into one half while the other half's device copies run.
// The copies are complete after spool_vk_stage_flush, which the caller
// runs before anything reads dst or the source memory changes.
int spool_vk_stage(spool_vk *v, spool_vk_buffer *dst, uint64_t dst_off, const void *src, uint64_t n);
int spool_vk_stage_flush(spool_vk *v);
// Stage_kick submits the staged copies recorded so far without waiting
// for them (the ring moves to its other half): work submitted after it
// that starts with a barrier sees them.
int spool_vk_stage_kick(spool_vk *v);
// Stage times: nanoseconds the staging ring has spent copying host bytes
// into staging memory and waiting for its device copies, since open.
void spool_vk_stage_times(spool_vk *v, uint64_t *copy_ns, uint64_t *wait_ns);

#endif
