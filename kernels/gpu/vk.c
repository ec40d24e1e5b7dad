//go:build vulkan && cgo

// Instance, device and buffers.
#include "vk_impl.h"

int vk_fail(spool_vk *v, VkResult r, const char *fmt, ...) {
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
	vk_copy_pool_stop(v->copiers);
	if (v->device) {
		v->vkDeviceWaitIdle(v->device);
		destroy_buffer(v, v->stage_buf);
		for (int i = 0; i < v->npipelines; i++) v->vkDestroyPipeline(v->device, v->pipelines[i].pipeline, NULL);
		for (int i = 0; i <= MAX_BIND; i++) {
			if (v->pipe_layout[i]) v->vkDestroyPipelineLayout(v->device, v->pipe_layout[i], NULL);
			if (v->set_layout[i]) v->vkDestroyDescriptorSetLayout(v->device, v->set_layout[i], NULL);
		}
		for (int i = 0; i < 2; i++) {
			if (v->mains[i].fence) v->vkDestroyFence(v->device, v->mains[i].fence, NULL);
			if (v->stage[i].fence) v->vkDestroyFence(v->device, v->stage[i].fence, NULL);
			if (v->dpools[i]) v->vkDestroyDescriptorPool(v->device, v->dpools[i], NULL);
		}
		if (v->pool) v->vkDestroyCommandPool(v->device, v->pool, NULL);
		v->vkDestroyDevice(v->device, NULL);
	}
	if (v->instance) v->vkDestroyInstance(v->instance, NULL);
	if (v->lib) dlclose(v->lib);
	free(v);
}

int vk_make_stream(spool_vk *v, stream_t *s) {
	VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
	ai.commandPool = v->pool;
	ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
	ai.commandBufferCount = 1;
	VkResult r = v->vkAllocateCommandBuffers(v->device, &ai, &s->cb);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkAllocateCommandBuffers");
	VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	r = v->vkCreateFence(v->device, &fi, NULL, &s->fence);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateFence");
	return 0;
}

static int open_device(spool_vk *v, int device_index) {
	uint32_t n = 0;
	VkResult r = v->vkEnumeratePhysicalDevices(v->instance, &n, NULL);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkEnumeratePhysicalDevices");
	if (n == 0) return vk_fail(v, VK_SUCCESS, "the Vulkan loader lists no device");
	VkPhysicalDevice pds[16];
	if (n > 16) n = 16;
	r = v->vkEnumeratePhysicalDevices(v->instance, &n, pds);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) return vk_fail(v, r, "vkEnumeratePhysicalDevices");
	v->info.devices = n;

	int pick = -1;
	if (device_index >= 0) {
		if ((uint32_t)device_index >= n) return vk_fail(v, VK_SUCCESS, "device %d requested, the loader lists %u", device_index, n);
		uint32_t fam;
		if (!compute_family(v, pds[device_index], &fam)) return vk_fail(v, VK_SUCCESS, "device %d has no compute queue", device_index);
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
		if (pick < 0) return vk_fail(v, VK_SUCCESS, "no Vulkan 1.1 device with a compute queue among %u", n);
	}
	v->phys = pds[pick];
	v->info.index = (uint32_t)pick;
	compute_family(v, v->phys, &v->queue_family);

	VkPhysicalDeviceProperties props;
	v->vkGetPhysicalDeviceProperties(v->phys, &props);
	if (props.apiVersion < VK_API_VERSION_1_1) return vk_fail(v, VK_SUCCESS, "%s supports only Vulkan %u.%u", props.deviceName,
	                                                      VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
	uint32_t ne = 0;
	v->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, NULL);
	VkExtensionProperties *exts = calloc(ne ? ne : 1, sizeof *exts);
	if (!exts) return vk_fail(v, VK_SUCCESS, "out of memory");
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
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateDevice on %s", props.deviceName);
#define LOAD_DEVICE(name)                                                                                              \
	v->name = (PFN_##name)v->vkGetDeviceProcAddr(v->device, #name);                                                    \
	if (!v->name) return vk_fail(v, VK_SUCCESS, "the driver lacks " #name);
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
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateCommandPool");
	VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, POOL_SETS * MAX_BIND};
	VkDescriptorPoolCreateInfo dpi = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
	dpi.maxSets = POOL_SETS;
	dpi.poolSizeCount = 1;
	dpi.pPoolSizes = &ps;
	for (int i = 0; i < 2; i++) {
		r = v->vkCreateDescriptorPool(v->device, &dpi, NULL, &v->dpools[i]);
		if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateDescriptorPool");
	}
	int e;
	if ((e = vk_make_stream(v, &v->mains[0])) || (e = vk_make_stream(v, &v->mains[1])) || (e = vk_make_stream(v, &v->stage[0])) ||
	    (e = vk_make_stream(v, &v->stage[1])))
		return e;
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
		rc = vk_fail(v, VK_SUCCESS, "no Vulkan loader: %s", dlerror());
		goto done;
	}
	v->vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(v->lib, "vkGetInstanceProcAddr");
	if (!v->vkGetInstanceProcAddr) {
		rc = vk_fail(v, VK_SUCCESS, "%s has no vkGetInstanceProcAddr", loader);
		goto done;
	}
#define LOAD_GLOBAL(name)                                                                                              \
	v->name = (PFN_##name)v->vkGetInstanceProcAddr(NULL, #name);                                                       \
	if (!v->name) {                                                                                                    \
		rc = vk_fail(v, VK_SUCCESS, "the loader lacks " #name);                                                           \
		goto done;                                                                                                     \
	}
	GLOBAL_FNS(LOAD_GLOBAL)

	uint32_t ne = 0;
	v->vkEnumerateInstanceExtensionProperties(NULL, &ne, NULL);
	VkExtensionProperties *exts = calloc(ne ? ne : 1, sizeof *exts);
	if (!exts) {
		rc = vk_fail(v, VK_SUCCESS, "out of memory");
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
		rc = vk_fail(v, r, "vkCreateInstance");
		goto done;
	}
#define LOAD_INSTANCE(name)                                                                                            \
	v->name = (PFN_##name)v->vkGetInstanceProcAddr(v->instance, #name);                                                \
	if (!v->name) {                                                                                                    \
		rc = vk_fail(v, VK_SUCCESS, "the loader lacks " #name);                                                           \
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
	if (!b) return vk_fail(v, VK_SUCCESS, "out of memory");
	b->size = size;
	VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
	bi.size = size;
	bi.usage = kUsage;
	bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
	VkResult r = v->vkCreateBuffer(v->device, &bi, NULL, &b->buffer);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return vk_fail(v, r, "vkCreateBuffer of %llu bytes", (unsigned long long)size);
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
	case SPOOL_MEM_MAPPED:
		t = find_type(v, req.memoryTypeBits, vis | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
		if (t >= 0 && v->mem.memoryHeaps[v->mem.memoryTypes[t].heapIndex].size < size) t = -1; // a small BAR window
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
		return vk_fail(v, VK_SUCCESS, "no memory type for a buffer of kind %d", kind);
	}
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.allocationSize = req.size;
	ai.memoryTypeIndex = (uint32_t)t;
	r = v->vkAllocateMemory(v->device, &ai, NULL, &b->memory);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return vk_fail(v, r, "vkAllocateMemory of %llu bytes", (unsigned long long)req.size);
	}
	r = v->vkBindBufferMemory(v->device, b->buffer, b->memory, 0);
	if (r != VK_SUCCESS) {
		destroy_buffer(v, b);
		return vk_fail(v, r, "vkBindBufferMemory");
	}
	if (kind != SPOOL_MEM_DEVICE && mapped) {
		// SPOOL_MEM_MAPPED is device memory the host writes directly.
		r = v->vkMapMemory(v->device, b->memory, 0, VK_WHOLE_SIZE, 0, mapped);
		if (r != VK_SUCCESS) {
			destroy_buffer(v, b);
			return vk_fail(v, r, "vkMapMemory");
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
	if (!v->info.host_import) return vk_fail(v, VK_SUCCESS, "host memory import is not available");
	uint64_t a = v->info.import_align;
	if (a && (((uintptr_t)ptr % a) || size % a)) return vk_fail(v, VK_SUCCESS, "import of %p+%llu is not aligned to %llu", ptr, (unsigned long long)size, (unsigned long long)a);
	spool_vk_buffer *b = calloc(1, sizeof *b);
	if (!b) return vk_fail(v, VK_SUCCESS, "out of memory");
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
		return vk_fail(v, r, "import of %llu host bytes", (unsigned long long)size);
	}
	*out = b;
	return 0;
}

void spool_vk_buffer_destroy(spool_vk *v, spool_vk_buffer *b) { destroy_buffer(v, b); }

