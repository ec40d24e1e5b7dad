//go:build vulkan && cgo

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
	X(vkResetFences)

#define DECLARE(name) PFN_##name name;

typedef struct {
	VkPipeline pipeline;
	int nbind;
} pipeline_t;

// A command buffer with its fence (the stream uses one, the staging ring two).
typedef struct {
	VkCommandBuffer cb;
	VkFence fence;
	int recording, pending;
} stream_t;

struct spool_vk_buffer {
	VkBuffer buffer;
	VkDeviceMemory memory;
	uint64_t size;
};

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
	VkDescriptorPool dpool;
	stream_t main;
	stream_t stage[2];
	spool_vk_buffer *stage_buf;
	void *stage_map;
	int stage_half;
	uint64_t stage_fill;

	char err[512];
};

static int fail(spool_vk *v, VkResult r, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(v->err, sizeof v->err, fmt, ap);
	va_end(ap);
	if (r != VK_SUCCESS && n >= 0 && (size_t)n < sizeof v->err) {
		snprintf(v->err + n, sizeof v->err - n, " (VkResult %d)", (int)r);
	}
	return r == VK_SUCCESS ? VK_ERROR_UNKNOWN : (int)r;
}

const char *spool_vk_last_error(spool_vk *v) { return v->err; }

static int has_ext(const VkExtensionProperties *exts, uint32_t n, const char *name) {
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(exts[i].extensionName, name) == 0) return 1;
	}
	return 0;
}

static int type_rank(VkPhysicalDeviceType t) {
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
	default: return 0;
	}
}

static int compute_family(spool_vk *v, VkPhysicalDevice pd, uint32_t *family) {
	uint32_t n = 0;
	v->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
	VkQueueFamilyProperties q[32];
	if (n > 32) n = 32;
	v->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
	// Prefer a family with compute and transfer, without graphics (a
	// dedicated compute queue) when there is one.
	int best = -1, best_score = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
		int score = (q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) ? 1 : 2;
		if (score > best_score) best = (int)i, best_score = score;
	}
	if (best < 0) return 0;
	*family = (uint32_t)best;
	return 1;
}

static void destroy_buffer(spool_vk *v, spool_vk_buffer *b) {
	if (!b) return;
	if (b->buffer) v->vkDestroyBuffer(v->device, b->buffer, NULL);
	if (b->memory) v->vkFreeMemory(v->device, b->memory, NULL);
	free(b);
}

void spool_vk_close(spool_vk *v) {
	if (!v) return;
	if (v->device) {
		v->vkDeviceWaitIdle(v->device);
		destroy_buffer(v, v->stage_buf);
		for (int i = 0; i < v->npipelines; i++) v->vkDestroyPipeline(v->device, v->pipelines[i].pipeline, NULL);
		for (int i = 0; i <= MAX_BIND; i++) {
			if (v->pipe_layout[i]) v->vkDestroyPipelineLayout(v->device, v->pipe_layout[i], NULL);
			if (v->set_layout[i]) v->vkDestroyDescriptorSetLayout(v->device, v->set_layout[i], NULL);
		}
		if (v->main.fence) v->vkDestroyFence(v->device, v->main.fence, NULL);
		for (int i = 0; i < 2; i++) {
			if (v->stage[i].fence) v->vkDestroyFence(v->device, v->stage[i].fence, NULL);
		}
		if (v->dpool) v->vkDestroyDescriptorPool(v->device, v->dpool, NULL);
		if (v->pool) v->vkDestroyCommandPool(v->device, v->pool, NULL);
		v->vkDestroyDevice(v->device, NULL);
	}
	if (v->instance) v->vkDestroyInstance(v->instance, NULL);
	if (v->lib) dlclose(v->lib);
	free(v);
}

static int make_stream(spool_vk *v, stream_t *s) {
	VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
	ai.commandPool = v->pool;
	ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
	ai.commandBufferCount = 1;
	VkResult r = v->vkAllocateCommandBuffers(v->device, &ai, &s->cb);
	if (r != VK_SUCCESS) return fail(v, r, "vkAllocateCommandBuffers");
	VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	r = v->vkCreateFence(v->device, &fi, NULL, &s->fence);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateFence");
	return 0;
}

static int open_device(spool_vk *v, int device_index) {
	uint32_t n = 0;
	VkResult r = v->vkEnumeratePhysicalDevices(v->instance, &n, NULL);
	if (r != VK_SUCCESS) return fail(v, r, "vkEnumeratePhysicalDevices");
	if (n == 0) return fail(v, VK_SUCCESS, "the Vulkan loader lists no device");
	VkPhysicalDevice pds[16];
	if (n > 16) n = 16;
	r = v->vkEnumeratePhysicalDevices(v->instance, &n, pds);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) return fail(v, r, "vkEnumeratePhysicalDevices");
	v->info.devices = n;

	int pick = -1;
	if (device_index >= 0) {
		if ((uint32_t)device_index >= n) return fail(v, VK_SUCCESS, "device %d requested, the loader lists %u", device_index, n);
		uint32_t fam;
		if (!compute_family(v, pds[device_index], &fam)) return fail(v, VK_SUCCESS, "device %d has no compute queue", device_index);
		pick = device_index;
	} else {
		int best_rank = -1;
		for (uint32_t i = 0; i < n; i++) {
			VkPhysicalDeviceProperties p;
			v->vkGetPhysicalDeviceProperties(pds[i], &p);
			uint32_t fam;
			if (p.apiVersion < VK_API_VERSION_1_1 || !compute_family(v, pds[i], &fam)) continue;
			int rank = type_rank(p.deviceType);
			if (rank > best_rank) best_rank = rank, pick = (int)i;
		}
		if (pick < 0) return fail(v, VK_SUCCESS, "no Vulkan 1.1 device with a compute queue among %u", n);
	}
	v->phys = pds[pick];
	v->info.index = (uint32_t)pick;
	compute_family(v, v->phys, &v->queue_family);

	VkPhysicalDeviceProperties props;
	v->vkGetPhysicalDeviceProperties(v->phys, &props);
	if (props.apiVersion < VK_API_VERSION_1_1) return fail(v, VK_SUCCESS, "%s supports only Vulkan %u.%u", props.deviceName,
	                                                      VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
	uint32_t ne = 0;
	v->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, NULL);
	VkExtensionProperties *exts = calloc(ne ? ne : 1, sizeof *exts);
	if (!exts) return fail(v, VK_SUCCESS, "out of memory");
	v->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, exts);
	const char *enable[4];
	uint32_t nenable = 0;
	if (has_ext(exts, ne, "VK_KHR_portability_subset")) {
		enable[nenable++] = "VK_KHR_portability_subset";
		v->info.portability = 1;
	}
	int import = has_ext(exts, ne, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) && has_ext(exts, ne, VK_KHR_EXTERNAL_MEMORY_EXTENSION_NAME);
	if (import) {
		enable[nenable++] = VK_KHR_EXTERNAL_MEMORY_EXTENSION_NAME;
		enable[nenable++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	}
	free(exts);

	VkPhysicalDeviceExternalMemoryHostPropertiesEXT hostp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
	VkPhysicalDeviceMaintenance3Properties m3 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
	VkPhysicalDeviceDriverProperties drv = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	p2.pNext = &m3;
	if (props.apiVersion >= VK_API_VERSION_1_2) {
		drv.pNext = p2.pNext;
		p2.pNext = &drv;
	}
	if (import) {
		hostp.pNext = p2.pNext;
		p2.pNext = &hostp;
	}
	v->vkGetPhysicalDeviceProperties2(v->phys, &p2);

	float prio = 1.0f;
	VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
	qi.queueFamilyIndex = v->queue_family;
	qi.queueCount = 1;
	qi.pQueuePriorities = &prio;
	VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
	di.queueCreateInfoCount = 1;
	di.pQueueCreateInfos = &qi;
	di.enabledExtensionCount = nenable;
	di.ppEnabledExtensionNames = enable;
	r = v->vkCreateDevice(v->phys, &di, NULL, &v->device);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateDevice on %s", props.deviceName);
#define LOAD_DEVICE(name)                                                                                              \
	v->name = (PFN_##name)v->vkGetDeviceProcAddr(v->device, #name);                                                    \
	if (!v->name) return fail(v, VK_SUCCESS, "the driver lacks " #name);
	DEVICE_FNS(LOAD_DEVICE)
	if (import) {
		v->vkGetMemoryHostPointerPropertiesEXT =
		    (PFN_vkGetMemoryHostPointerPropertiesEXT)v->vkGetDeviceProcAddr(v->device, "vkGetMemoryHostPointerPropertiesEXT");
		import = v->vkGetMemoryHostPointerPropertiesEXT != NULL;
	}
	v->vkGetDeviceQueue(v->device, v->queue_family, 0, &v->queue);
	v->vkGetPhysicalDeviceMemoryProperties(v->phys, &v->mem);

	spool_vk_info *in = &v->info;
	snprintf(in->name, sizeof in->name, "%s", props.deviceName);
	if (props.apiVersion >= VK_API_VERSION_1_2) {
		snprintf(in->driver, sizeof in->driver, "%s %s", drv.driverName, drv.driverInfo);
	}
	in->api_version = props.apiVersion;
	in->driver_version = props.driverVersion;
	in->vendor_id = props.vendorID;
	in->device_id = props.deviceID;
	in->device_type = props.deviceType;
	in->host_import = import;
	in->import_align = import ? hostp.minImportedHostPointerAlignment : 0;
	in->max_storage_range = props.limits.maxStorageBufferRange;
	in->max_alloc = m3.maxMemoryAllocationSize;
	in->storage_align = props.limits.minStorageBufferOffsetAlignment;
	for (int i = 0; i < 3; i++) in->max_wg_count[i] = props.limits.maxComputeWorkGroupCount[i];
	in->max_shared = props.limits.maxComputeSharedMemorySize;
	in->max_invocations = props.limits.maxComputeWorkGroupInvocations;
	int all_visible = 1;
	for (uint32_t i = 0; i < v->mem.memoryHeapCount; i++) {
		if (v->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
			if (v->mem.memoryHeaps[i].size > in->device_local_bytes) in->device_local_bytes = v->mem.memoryHeaps[i].size;
		}
	}
	for (uint32_t i = 0; i < v->mem.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = v->mem.memoryTypes[i].propertyFlags;
		if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) all_visible = 0;
	}
	in->unified = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
	              all_visible;

	VkCommandPoolCreateInfo pi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
	pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
	pi.queueFamilyIndex = v->queue_family;
	r = v->vkCreateCommandPool(v->device, &pi, NULL, &v->pool);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateCommandPool");
	VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, POOL_SETS * MAX_BIND};
	VkDescriptorPoolCreateInfo dpi = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
	dpi.maxSets = POOL_SETS;
	dpi.poolSizeCount = 1;
	dpi.pPoolSizes = &ps;
	r = v->vkCreateDescriptorPool(v->device, &dpi, NULL, &v->dpool);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateDescriptorPool");
	int e;
	if ((e = make_stream(v, &v->main)) || (e = make_stream(v, &v->stage[0])) || (e = make_stream(v, &v->stage[1]))) return e;
	void *map;
	if ((e = spool_vk_buffer_create(v, 2 * (uint64_t)STAGE_HALF, SPOOL_MEM_UPLOAD, &v->stage_buf, &map))) return e;
	v->stage_map = map;
	return 0;
}

int spool_vk_open(const char *loader, int device_index, spool_vk **out, char *err, size_t errlen) {
	*out = NULL;
	spool_vk *v = calloc(1, sizeof *v);
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	}
	int rc = 0;
	v->lib = dlopen(loader, RTLD_NOW | RTLD_LOCAL);
	if (!v->lib) {
		rc = fail(v, VK_SUCCESS, "no Vulkan loader: %s", dlerror());
		goto done;
	}
	v->vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(v->lib, "vkGetInstanceProcAddr");
	if (!v->vkGetInstanceProcAddr) {
		rc = fail(v, VK_SUCCESS, "%s has no vkGetInstanceProcAddr", loader);
		goto done;
	}
#define LOAD_GLOBAL(name)                                                                                              \
	v->name = (PFN_##name)v->vkGetInstanceProcAddr(NULL, #name);                                                       \
	if (!v->name) {                                                                                                    \
		rc = fail(v, VK_SUCCESS, "the loader lacks " #name);                                                           \
		goto done;                                                                                                     \
	}
	GLOBAL_FNS(LOAD_GLOBAL)

	uint32_t ne = 0;
	v->vkEnumerateInstanceExtensionProperties(NULL, &ne, NULL);
	VkExtensionProperties *exts = calloc(ne ? ne : 1, sizeof *exts);
	if (!exts) {
		rc = fail(v, VK_SUCCESS, "out of memory");
		goto done;
	}
	v->vkEnumerateInstanceExtensionProperties(NULL, &ne, exts);
	const char *enable[2];
	uint32_t nenable = 0;
	VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
	// MoltenVK is a portability driver: the loader lists it only when asked.
	if (has_ext(exts, ne, "VK_KHR_portability_enumeration")) {
		enable[nenable++] = "VK_KHR_portability_enumeration";
		ci.flags |= 0x00000001; // VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
	}
	free(exts);
	VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
	app.pApplicationName = "spool";
	app.pEngineName = "spool";
	app.apiVersion = VK_API_VERSION_1_2;
	ci.pApplicationInfo = &app;
	ci.enabledExtensionCount = nenable;
	ci.ppEnabledExtensionNames = enable;
	VkResult r = v->vkCreateInstance(&ci, NULL, &v->instance);
	if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
		app.apiVersion = VK_API_VERSION_1_1;
		r = v->vkCreateInstance(&ci, NULL, &v->instance);
	}
	if (r != VK_SUCCESS) {
		rc = fail(v, r, "vkCreateInstance");
		goto done;
	}
#define LOAD_INSTANCE(name)                                                                                            \
	v->name = (PFN_##name)v->vkGetInstanceProcAddr(v->instance, #name);                                                \
	if (!v->name) {                                                                                                    \
		rc = fail(v, VK_SUCCESS, "the loader lacks " #name);                                                           \
		goto done;                                                                                                     \
	}
	INSTANCE_FNS(LOAD_INSTANCE)
	rc = open_device(v, device_index);
done:
	if (rc) {
		snprintf(err, errlen, "%s", v->err);
		spool_vk_close(v);
		return rc;
	}
	*out = v;
	return 0;
}

void spool_vk_get_info(spool_vk *v, spool_vk_info *info) { *info = v->info; }

static int find_type(spool_vk *v, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
	for (uint32_t i = 0; i < v->mem.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = v->mem.memoryTypes[i].propertyFlags;
		if ((bits & (1u << i)) && (f & want) == want && !(f & avoid)) return (int)i;
	}
	return -1;
}

static const VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

int spool_vk_buffer_create(spool_vk *v, uint64_t size, int kind, spool_vk_buffer **out, void **mapped) {
	*out = NULL;
	if (mapped) *mapped = NULL;
	spool_vk_buffer *b = calloc(1, sizeof *b);
	if (!b) return fail(v, VK_SUCCESS, "out of memory");
	b->size = size;
	VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
	bi.size = size;
	bi.usage = kUsage;
	bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
	VkResult r = v->vkCreateBuffer(v->device, &bi, NULL, &b->buffer);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return fail(v, r, "vkCreateBuffer of %llu bytes", (unsigned long long)size);
	}
	VkMemoryRequirements req;
	v->vkGetBufferMemoryRequirements(v->device, b->buffer, &req);
	const VkMemoryPropertyFlags vis = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	int t = -1;
	switch (kind) {
	case SPOOL_MEM_DEVICE:
		t = find_type(v, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
		if (t < 0) t = find_type(v, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
		break;
	case SPOOL_MEM_UPLOAD:
		t = find_type(v, req.memoryTypeBits, vis, VK_MEMORY_PROPERTY_HOST_CACHED_BIT | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
		if (t < 0) t = find_type(v, req.memoryTypeBits, vis, 0);
		break;
	default:
		t = find_type(v, req.memoryTypeBits, vis | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
		if (t < 0) t = find_type(v, req.memoryTypeBits, vis, 0);
	}
	if (t < 0) {
		destroy_buffer(v, b);
		return fail(v, VK_SUCCESS, "no memory type for a buffer of kind %d", kind);
	}
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.allocationSize = req.size;
	ai.memoryTypeIndex = (uint32_t)t;
	r = v->vkAllocateMemory(v->device, &ai, NULL, &b->memory);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return fail(v, r, "vkAllocateMemory of %llu bytes", (unsigned long long)req.size);
	}
	r = v->vkBindBufferMemory(v->device, b->buffer, b->memory, 0);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return fail(v, r, "vkBindBufferMemory");
	}
	if (kind != SPOOL_MEM_DEVICE && mapped) {
		r = v->vkMapMemory(v->device, b->memory, 0, VK_WHOLE_SIZE, 0, mapped);
		if (r != VK_SUCCESS) {
			destroy_buffer(v, b);
			return fail(v, r, "vkMapMemory");
		}
	}
	*out = b;
	return 0;
}

static VkResult import_buffer(spool_vk *v, void *ptr, uint64_t size, int declare, spool_vk_buffer *b) {
	VkExternalMemoryBufferCreateInfo ext = {VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
	ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
	bi.pNext = declare ? &ext : NULL;
	bi.size = size;
	bi.usage = kUsage;
	bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
	VkResult r = v->vkCreateBuffer(v->device, &bi, NULL, &b->buffer);
	if (r != VK_SUCCESS) return r;
	VkMemoryRequirements req;
	v->vkGetBufferMemoryRequirements(v->device, b->buffer, &req);
	VkMemoryHostPointerPropertiesEXT hp = {VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	r = v->vkGetMemoryHostPointerPropertiesEXT(v->device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, ptr, &hp);
	if (r != VK_SUCCESS) return r;
	int t = find_type(v, req.memoryTypeBits & hp.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0);
	if (t < 0) return VK_ERROR_FORMAT_NOT_SUPPORTED;
	VkImportMemoryHostPointerInfoEXT imp = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
	imp.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	imp.pHostPointer = ptr;
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.pNext = &imp;
	ai.allocationSize = size;
	ai.memoryTypeIndex = (uint32_t)t;
	r = v->vkAllocateMemory(v->device, &ai, NULL, &b->memory);
	if (r != VK_SUCCESS) return r;
	return v->vkBindBufferMemory(v->device, b->buffer, b->memory, 0);
}

int spool_vk_buffer_import(spool_vk *v, void *ptr, uint64_t size, spool_vk_buffer **out) {
	*out = NULL;
	if (!v->info.host_import) return fail(v, VK_SUCCESS, "host memory import is not available");
	uint64_t a = v->info.import_align;
	if (a && (((uintptr_t)ptr % a) || size % a)) return fail(v, VK_SUCCESS, "import of %p+%llu is not aligned to %llu", ptr, (unsigned long long)size, (unsigned long long)a);
	spool_vk_buffer *b = calloc(1, sizeof *b);
	if (!b) return fail(v, VK_SUCCESS, "out of memory");
	b->size = size;
	VkResult r = import_buffer(v, ptr, size, 1, b);
	if (r != VK_SUCCESS) {
		// Several MoltenVK releases reject buffers that declare the host
		// handle type (MoltenVK#2619, #2806) but bind imported memory to
		// plain buffers.
		if (b->buffer) v->vkDestroyBuffer(v->device, b->buffer, NULL);
		if (b->memory) v->vkFreeMemory(v->device, b->memory, NULL);
		b->buffer = VK_NULL_HANDLE;
		b->memory = VK_NULL_HANDLE;
		if (v->info.portability) r = import_buffer(v, ptr, size, 0, b);
	}
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return fail(v, r, "import of %llu host bytes", (unsigned long long)size);
	}
	*out = b;
	return 0;
}

void spool_vk_buffer_destroy(spool_vk *v, spool_vk_buffer *b) { destroy_buffer(v, b); }

static int layouts(spool_vk *v, int nbind) {
	if (v->pipe_layout[nbind]) return 0;
	VkDescriptorSetLayoutBinding bs[MAX_BIND];
	for (int i = 0; i < nbind; i++) {
		bs[i] = (VkDescriptorSetLayoutBinding){(uint32_t)i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
	}
	VkDescriptorSetLayoutCreateInfo li = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
	li.bindingCount = (uint32_t)nbind;
	li.pBindings = bs;
	VkResult r = v->vkCreateDescriptorSetLayout(v->device, &li, NULL, &v->set_layout[nbind]);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateDescriptorSetLayout");
	VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
	VkPipelineLayoutCreateInfo pli = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
	pli.setLayoutCount = 1;
	pli.pSetLayouts = &v->set_layout[nbind];
	pli.pushConstantRangeCount = 1;
	pli.pPushConstantRanges = &pr;
	r = v->vkCreatePipelineLayout(v->device, &pli, NULL, &v->pipe_layout[nbind]);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreatePipelineLayout");
	return 0;
}

int spool_vk_pipeline(spool_vk *v, const uint32_t *code, size_t code_bytes, int nbind, const uint32_t *spec, int nspec,
                      int *out_id) {
	if (nbind < 1 || nbind > MAX_BIND) return fail(v, VK_SUCCESS, "a pipeline takes 1 to %d buffers, not %d", MAX_BIND, nbind);
	if (v->npipelines == MAX_PIPELINES) return fail(v, VK_SUCCESS, "more than %d pipelines", MAX_PIPELINES);
	if (nspec > 16) return fail(v, VK_SUCCESS, "more than 16 specialization constants");
	int e = layouts(v, nbind);
	if (e) return e;
	VkShaderModuleCreateInfo si = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
	si.codeSize = code_bytes;
	si.pCode = code;
	VkShaderModule mod;
	VkResult r = v->vkCreateShaderModule(v->device, &si, NULL, &mod);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateShaderModule");
	VkSpecializationMapEntry entries[16];
	for (int i = 0; i < nspec; i++) entries[i] = (VkSpecializationMapEntry){(uint32_t)i, (uint32_t)(4 * i), 4};
	VkSpecializationInfo spi = {(uint32_t)nspec, entries, (size_t)(4 * nspec), spec};
	VkComputePipelineCreateInfo ci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
	ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
	ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
	ci.stage.module = mod;
	ci.stage.pName = "main";
	ci.stage.pSpecializationInfo = nspec ? &spi : NULL;
	ci.layout = v->pipe_layout[nbind];
	VkPipeline p;
	r = v->vkCreateComputePipelines(v->device, VK_NULL_HANDLE, 1, &ci, NULL, &p);
	v->vkDestroyShaderModule(v->device, mod, NULL);
	if (r != VK_SUCCESS) return fail(v, r, "vkCreateComputePipelines");
	v->pipelines[v->npipelines] = (pipeline_t){p, nbind};
	*out_id = v->npipelines++;
	return 0;
}

static int begin(spool_vk *v, stream_t *s) {
	if (s->recording) return 0;
	VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
	VkResult r = v->vkBeginCommandBuffer(s->cb, &bi);
	if (r != VK_SUCCESS) return fail(v, r, "vkBeginCommandBuffer");
	s->recording = 1;
	return 0;
}

// run submits s, which must be recording; finish waits for it.
static int run(spool_vk *v, stream_t *s) {
	VkResult r = v->vkEndCommandBuffer(s->cb);
	s->recording = 0;
	if (r != VK_SUCCESS) return fail(v, r, "vkEndCommandBuffer");
	VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
	si.commandBufferCount = 1;
	si.pCommandBuffers = &s->cb;
	r = v->vkQueueSubmit(v->queue, 1, &si, s->fence);
	if (r != VK_SUCCESS) return fail(v, r, "vkQueueSubmit");
	s->pending = 1;
	return 0;
}

static int finish(spool_vk *v, stream_t *s) {
	if (!s->pending) return 0;
	VkResult r = v->vkWaitForFences(v->device, 1, &s->fence, VK_TRUE, UINT64_MAX);
	s->pending = 0;
	if (r != VK_SUCCESS) return fail(v, r, "vkWaitForFences");
	r = v->vkResetFences(v->device, 1, &s->fence);
	if (r != VK_SUCCESS) return fail(v, r, "vkResetFences");
	r = v->vkResetCommandBuffer(s->cb, 0);
	if (r != VK_SUCCESS) return fail(v, r, "vkResetCommandBuffer");
	return 0;
}

int spool_vk_submit(spool_vk *v) {
	if (!v->main.recording) return 0;
	int e = run(v, &v->main);
	if (!e) e = finish(v, &v->main);
	VkResult r = v->vkResetDescriptorPool(v->device, v->dpool, 0);
	if (!e && r != VK_SUCCESS) e = fail(v, r, "vkResetDescriptorPool");
	return e;
}

int spool_vk_barrier(spool_vk *v) {
	int e = begin(v, &v->main);
	if (e) return e;
	VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
	mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
	v->vkCmdPipelineBarrier(v->main.cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
	return 0;
}

int spool_vk_copy(spool_vk *v, spool_vk_buffer *src, uint64_t src_off, spool_vk_buffer *dst, uint64_t dst_off, uint64_t n) {
	if (n == 0) return 0;
	int e = begin(v, &v->main);
	if (e) return e;
	VkBufferCopy c = {src_off, dst_off, n};
	v->vkCmdCopyBuffer(v->main.cb, src->buffer, dst->buffer, 1, &c);
	return 0;
}

int spool_vk_fill(spool_vk *v, spool_vk_buffer *dst, uint64_t off, uint64_t n, uint32_t value) {
	if (n == 0) return 0;
	int e = begin(v, &v->main);
	if (e) return e;
	v->vkCmdFillBuffer(v->main.cb, dst->buffer, off, n, value);
	return 0;
}

int spool_vk_dispatch(spool_vk *v, int pipeline, const spool_vk_bind *binds, int nbind, const void *push, uint32_t push_len,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
	if (pipeline < 0 || pipeline >= v->npipelines) return fail(v, VK_SUCCESS, "no pipeline %d", pipeline);
	pipeline_t *p = &v->pipelines[pipeline];
	if (nbind != p->nbind) return fail(v, VK_SUCCESS, "pipeline %d takes %d buffers, got %d", pipeline, p->nbind, nbind);
	if (push_len > 128) return fail(v, VK_SUCCESS, "push constants of %u bytes", push_len);
	if (gx == 0 || gy == 0 || gz == 0) return 0;
	int e = begin(v, &v->main);
	if (e) return e;
	VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
	ai.descriptorPool = v->dpool;
	ai.descriptorSetCount = 1;
	ai.pSetLayouts = &v->set_layout[nbind];
	VkDescriptorSet set;
	VkResult r = v->vkAllocateDescriptorSets(v->device, &ai, &set);
	if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
		// The pool is full: run what was recorded, then start over.
		if ((e = spool_vk_submit(v)) || (e = begin(v, &v->main))) return e;
		r = v->vkAllocateDescriptorSets(v->device, &ai, &set);
	}
	if (r != VK_SUCCESS) return fail(v, r, "vkAllocateDescriptorSets");
	VkDescriptorBufferInfo bi[MAX_BIND];
	VkWriteDescriptorSet w[MAX_BIND];
	for (int i = 0; i < nbind; i++) {
		bi[i] = (VkDescriptorBufferInfo){binds[i].buf->buffer, binds[i].offset, binds[i].range};
		w[i] = (VkWriteDescriptorSet){VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
		w[i].dstSet = set;
		w[i].dstBinding = (uint32_t)i;
		w[i].descriptorCount = 1;
		w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		w[i].pBufferInfo = &bi[i];
	}
	v->vkUpdateDescriptorSets(v->device, (uint32_t)nbind, w, 0, NULL);
	VkCommandBuffer cb = v->main.cb;
	v->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
	v->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, v->pipe_layout[nbind], 0, 1, &set, 0, NULL);
	if (push_len) v->vkCmdPushConstants(cb, v->pipe_layout[nbind], VK_SHADER_STAGE_COMPUTE_BIT, 0, push_len, push);
	v->vkCmdDispatch(cb, gx, gy, gz);
	return 0;
}

// Large copies into staging memory (uncached, write-combined on discrete
// GPUs) run on several threads: one core writes such memory at a fraction
// of what the bus takes.
#define COPY_THREADS 8
#define COPY_SPLIT (4u << 20)

typedef struct {
	char *dst;
	const char *src;
	size_t n;
} copy_job;

static void *copy_part(void *arg) {
	copy_job *j = arg;
	memcpy(j->dst, j->src, j->n);
	return NULL;
}

static void parallel_memcpy(void *dst, const void *src, size_t n) {
	size_t parts = n / COPY_SPLIT;
	if (parts > COPY_THREADS) parts = COPY_THREADS;
	if (parts < 2) {
		memcpy(dst, src, n);
		return;
	}
	copy_job jobs[COPY_THREADS];
	pthread_t th[COPY_THREADS];
	size_t chunk = (n / parts + 63) & ~(size_t)63, off = 0;
	size_t started = 0;
	for (size_t i = 0; i < parts && off < n; i++) {
		size_t c = n - off < chunk ? n - off : chunk;
		jobs[i] = (copy_job){(char *)dst + off, (const char *)src + off, c};
		off += c;
		if (i + 1 == parts || off == n) {
			copy_part(&jobs[i]); // the last part on this thread
			break;
		}
		if (pthread_create(&th[started], NULL, copy_part, &jobs[i]) != 0) {
			copy_part(&jobs[i]);
			continue;
		}
		started++;
	}
	if (off < n) memcpy((char *)dst + off, (const char *)src + off, n - off);
	for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
}

// The staging ring: two halves, each filled by memcpy while the other's
// copies run. stage_fill is the fill of the current half.
static int stage_switch(spool_vk *v) {
	stream_t *s = &v->stage[v->stage_half];
	int e = 0;
	if (s->recording) e = run(v, s);
	v->stage_half ^= 1;
	v->stage_fill = 0;
	// The other half's previous copies must be done before memcpy reuses it.
	int e2 = finish(v, &v->stage[v->stage_half]);
	return e ? e : e2;
}

int spool_vk_stage(spool_vk *v, spool_vk_buffer *dst, uint64_t dst_off, const void *src, uint64_t n) {
	const char *p = src;
	int e = 0;
	while (n > 0) {
		if (v->stage_fill == STAGE_HALF && (e = stage_switch(v))) return e;
		uint64_t c = STAGE_HALF - v->stage_fill;
		if (c > n) c = n;
		stream_t *s = &v->stage[v->stage_half];
		if ((e = begin(v, s))) return e;
		uint64_t at = (uint64_t)v->stage_half * STAGE_HALF + v->stage_fill;
		parallel_memcpy((char *)v->stage_map + at, p, c);
		VkBufferCopy bc = {at, dst_off, c};
		v->vkCmdCopyBuffer(s->cb, v->stage_buf->buffer, dst->buffer, 1, &bc);
		// Keep the next piece 16-byte aligned in staging.
		v->stage_fill += (c + 15) & ~(uint64_t)15;
		if (v->stage_fill > STAGE_HALF) v->stage_fill = STAGE_HALF;
		p += c, dst_off += c, n -= c;
	}
	return 0;
}

int spool_vk_stage_flush(spool_vk *v) {
	stream_t *s = &v->stage[v->stage_half];
	int e = 0;
	if (s->recording) e = run(v, s);
	int e0 = finish(v, &v->stage[0]), e1 = finish(v, &v->stage[1]);
	v->stage_fill = 0;
	return e ? e : e0 ? e0 : e1;
}
