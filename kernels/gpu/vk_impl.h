//go:build vulkan && cgo

// Internal to vk.c and vk_stream.c: the state of an open device.
#ifndef SPOOL_VK_IMPL_H
#define SPOOL_VK_IMPL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#define MAX_PIPELINES 256
#define MAX_BIND 8
#define POOL_SETS 1024
#define STAGE_HALF (32u << 20)

// The functions the backend calls, loaded through vkGetInstanceProcAddr.
#define GLOBAL_FNS(X)                                                                                                  \
	X(vkCreateInstance)                                                                                                \
	X(vkEnumerateInstanceExtensionProperties)

#define INSTANCE_FNS(X)                                                                                                \
	X(vkDestroyInstance)                                                                                               \
	X(vkEnumeratePhysicalDevices)                                                                                      \
	X(vkGetPhysicalDeviceProperties)                                                                                   \
	X(vkGetPhysicalDeviceProperties2)                                                                                  \
	X(vkGetPhysicalDeviceQueueFamilyProperties)                                                                        \
	X(vkGetPhysicalDeviceMemoryProperties)                                                                             \
	X(vkEnumerateDeviceExtensionProperties)                                                                            \
	X(vkCreateDevice)                                                                                                  \
	X(vkGetDeviceProcAddr)

#define DEVICE_FNS(X)                                                                                                  \
	X(vkDestroyDevice)                                                                                                 \
	X(vkDeviceWaitIdle)                                                                                                \
	X(vkGetDeviceQueue)                                                                                                \
	X(vkCreateBuffer)                                                                                                  \
	X(vkDestroyBuffer)                                                                                                 \
	X(vkGetBufferMemoryRequirements)                                                                                   \
	X(vkAllocateMemory)                                                                                                \
	X(vkFreeMemory)                                                                                                    \
	X(vkBindBufferMemory)                                                                                              \
	X(vkMapMemory)                                                                                                     \
	X(vkCreateShaderModule)                                                                                            \
	X(vkDestroyShaderModule)                                                                                           \
	X(vkCreateDescriptorSetLayout)                                                                                     \
	X(vkDestroyDescriptorSetLayout)                                                                                    \
	X(vkCreatePipelineLayout)                                                                                          \
	X(vkDestroyPipelineLayout)                                                                                         \
	X(vkCreateComputePipelines)                                                                                        \
	X(vkDestroyPipeline)                                                                                               \
	X(vkCreateDescriptorPool)                                                                                          \
	X(vkDestroyDescriptorPool)                                                                                         \
	X(vkResetDescriptorPool)                                                                                           \
	X(vkAllocateDescriptorSets)                                                                                        \
	X(vkUpdateDescriptorSets)                                                                                          \
	X(vkCreateCommandPool)                                                                                             \
	X(vkDestroyCommandPool)                                                                                            \
	X(vkAllocateCommandBuffers)                                                                                        \
	X(vkBeginCommandBuffer)                                                                                            \
	X(vkEndCommandBuffer)                                                                                              \
	X(vkResetCommandBuffer)                                                                                            \
	X(vkCmdBindPipeline)                                                                                               \
	X(vkCmdBindDescriptorSets)                                                                                         \
	X(vkCmdPushConstants)                                                                                              \
	X(vkCmdDispatch)                                                                                                   \
	X(vkCmdPipelineBarrier)                                                                                            \
	X(vkCmdCopyBuffer)                                                                                                 \
	X(vkCmdFillBuffer)                                                                                                 \
	X(vkQueueSubmit)                                                                                                   \
	X(vkCreateFence)                                                                                                   \
	X(vkDestroyFence)                                                                                                  \
	X(vkWaitForFences)                                                                                                 \
	X(vkGetFenceStatus)                                                                                                \
	X(vkResetFences)

#define DECLARE(name) PFN_##name name;

typedef struct {
	VkPipeline pipeline;
	int nbind;
} pipeline_t;

// A command buffer with its fence (the command stream uses two, the
// staging ring two). seq numbers a main stream's pending submission.
typedef struct {
	VkCommandBuffer cb;
	VkFence fence;
	int recording, pending;
	uint64_t seq;
} stream_t;

struct spool_vk_buffer {
	VkBuffer buffer;
	VkDeviceMemory memory;
	uint64_t size;
};

// copy_pool is the staging ring's copy threads (vk_stream.c).
typedef struct copy_pool copy_pool;
void vk_copy_pool_stop(copy_pool *p);

struct spool_vk {
	void *lib;
	PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
	GLOBAL_FNS(DECLARE)
	INSTANCE_FNS(DECLARE)
	DEVICE_FNS(DECLARE)
	PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT;

	VkInstance instance;
	VkPhysicalDevice phys;
	VkDevice device;
	VkQueue queue;
	uint32_t queue_family;
	VkPhysicalDeviceMemoryProperties mem;
	spool_vk_info info;

	VkDescriptorSetLayout set_layout[MAX_BIND + 1];
	VkPipelineLayout pipe_layout[MAX_BIND + 1];
	pipeline_t pipelines[MAX_PIPELINES];
	int npipelines;

	VkCommandPool pool;
	// The command stream: two command buffers, each with its descriptor
	// pool, so that one records while the other's submission runs
	// (spool_vk_submit_async). cur is the one recording; submitted counts
	// the submissions.
	VkDescriptorPool dpools[2];
	stream_t mains[2];
	int cur;
	uint64_t submitted;
	stream_t stage[2];
	spool_vk_buffer *stage_buf;
	void *stage_map;
	int stage_half;
	uint64_t stage_fill;
	// Nanoseconds the staging ring spent copying into staging memory and
	// waiting for its device copies (spool_vk_stage_times).
	uint64_t stage_copy_ns, stage_wait_ns;
	copy_pool *copiers; // started on the first large staging copy

	char err[512];
};


// vk_fail records a formatted error (with r when it is not VK_SUCCESS) and
// returns a nonzero code.
int vk_fail(spool_vk *v, VkResult r, const char *fmt, ...);
// vk_make_stream allocates a command buffer and its fence.
int vk_make_stream(spool_vk *v, stream_t *s);

#endif
