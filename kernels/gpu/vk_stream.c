//go:build vulkan && cgo

// Pipelines, the command stream and the staging ring.
#include <time.h>

#include "vk_impl.h"

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
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateDescriptorSetLayout");
	VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
	VkPipelineLayoutCreateInfo pli = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
	pli.setLayoutCount = 1;
	pli.pSetLayouts = &v->set_layout[nbind];
	pli.pushConstantRangeCount = 1;
	pli.pPushConstantRanges = &pr;
	r = v->vkCreatePipelineLayout(v->device, &pli, NULL, &v->pipe_layout[nbind]);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreatePipelineLayout");
	return 0;
}

int spool_vk_pipeline(spool_vk *v, const uint32_t *code, size_t code_bytes, int nbind, const uint32_t *spec, int nspec,
                      int *out_id) {
	if (nbind < 1 || nbind > MAX_BIND) return vk_fail(v, VK_SUCCESS, "a pipeline takes 1 to %d buffers, not %d", MAX_BIND, nbind);
	if (v->npipelines == MAX_PIPELINES) return vk_fail(v, VK_SUCCESS, "more than %d pipelines", MAX_PIPELINES);
	if (nspec > 16) return vk_fail(v, VK_SUCCESS, "more than 16 specialization constants");
	int e = layouts(v, nbind);
	if (e) return e;
	VkShaderModuleCreateInfo si = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
	si.codeSize = code_bytes;
	si.pCode = code;
	VkShaderModule mod;
	VkResult r = v->vkCreateShaderModule(v->device, &si, NULL, &mod);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateShaderModule");
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
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkCreateComputePipelines");
	v->pipelines[v->npipelines] = (pipeline_t){p, nbind};
	*out_id = v->npipelines++;
	return 0;
}

static int begin(spool_vk *v, stream_t *s) {
	if (s->recording) return 0;
	VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
	VkResult r = v->vkBeginCommandBuffer(s->cb, &bi);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkBeginCommandBuffer");
	s->recording = 1;
	return 0;
}

// run submits s, which must be recording; finish waits for it.
static int run(spool_vk *v, stream_t *s) {
	VkResult r = v->vkEndCommandBuffer(s->cb);
	s->recording = 0;
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkEndCommandBuffer");
	VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
	si.commandBufferCount = 1;
	si.pCommandBuffers = &s->cb;
	r = v->vkQueueSubmit(v->queue, 1, &si, s->fence);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkQueueSubmit");
	s->pending = 1;
	return 0;
}

static int finish(spool_vk *v, stream_t *s) {
	if (!s->pending) return 0;
	VkResult r = v->vkWaitForFences(v->device, 1, &s->fence, VK_TRUE, UINT64_MAX);
	s->pending = 0;
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkWaitForFences");
	r = v->vkResetFences(v->device, 1, &s->fence);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkResetFences");
	r = v->vkResetCommandBuffer(s->cb, 0);
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkResetCommandBuffer");
	return 0;
}

// finish_main waits for main stream i's submission and frees its
// descriptor sets.
static int finish_main(spool_vk *v, int i) {
	stream_t *s = &v->mains[i];
	if (!s->pending) return 0;
	int e = finish(v, s);
	VkResult r = v->vkResetDescriptorPool(v->device, v->dpools[i], 0);
	if (!e && r != VK_SUCCESS) e = vk_fail(v, r, "vkResetDescriptorPool");
	return e;
}

// main_begin starts recording on the current main stream, first waiting
// for its previous submission (two submissions back).
static int main_begin(spool_vk *v) {
	stream_t *s = &v->mains[v->cur];
	if (s->recording) return 0;
	int e = finish_main(v, v->cur);
	return e ? e : begin(v, s);
}

static VkCommandBuffer main_cb(spool_vk *v) { return v->mains[v->cur].cb; }

int spool_vk_submit(spool_vk *v) {
	stream_t *s = &v->mains[v->cur];
	int e = 0;
	if (s->recording) {
		e = run(v, s);
		s->seq = ++v->submitted;
	}
	int e0 = finish_main(v, 0), e1 = finish_main(v, 1);
	return e ? e : e0 ? e0 : e1;
}

int spool_vk_submit_async(spool_vk *v, uint64_t *seq) {
	stream_t *s = &v->mains[v->cur];
	*seq = v->submitted;
	if (!s->recording) return 0;
	int e = run(v, s);
	if (e) return e;
	s->seq = *seq = ++v->submitted;
	v->cur ^= 1;
	return 0;
}

int spool_vk_wait(spool_vk *v, uint64_t seq) {
	int e = 0;
	for (int i = 0; i < 2 && !e; i++) {
		if (v->mains[i].pending && v->mains[i].seq <= seq) e = finish_main(v, i);
	}
	return e;
}

int spool_vk_busy(spool_vk *v) {
	for (int i = 0; i < 2; i++) {
		if (v->mains[i].pending && v->vkGetFenceStatus(v->device, v->mains[i].fence) == VK_NOT_READY) return 1;
	}
	return 0;
}

int spool_vk_barrier(spool_vk *v) {
	int e = main_begin(v);
	if (e) return e;
	VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
	mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
	v->vkCmdPipelineBarrier(main_cb(v), st, st, 0, 1, &mb, 0, NULL, 0, NULL);
	return 0;
}

int spool_vk_copy(spool_vk *v, spool_vk_buffer *src, uint64_t src_off, spool_vk_buffer *dst, uint64_t dst_off, uint64_t n) {
	if (n == 0) return 0;
	int e = main_begin(v);
	if (e) return e;
	VkBufferCopy c = {src_off, dst_off, n};
	v->vkCmdCopyBuffer(main_cb(v), src->buffer, dst->buffer, 1, &c);
	return 0;
}

int spool_vk_fill(spool_vk *v, spool_vk_buffer *dst, uint64_t off, uint64_t n, uint32_t value) {
	if (n == 0) return 0;
	int e = main_begin(v);
	if (e) return e;
	v->vkCmdFillBuffer(main_cb(v), dst->buffer, off, n, value);
	return 0;
}

int spool_vk_dispatch(spool_vk *v, int pipeline, const spool_vk_bind *binds, int nbind, const void *push, uint32_t push_len,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
	if (pipeline < 0 || pipeline >= v->npipelines) return vk_fail(v, VK_SUCCESS, "no pipeline %d", pipeline);
	pipeline_t *p = &v->pipelines[pipeline];
	if (nbind != p->nbind) return vk_fail(v, VK_SUCCESS, "pipeline %d takes %d buffers, got %d", pipeline, p->nbind, nbind);
	if (push_len > 128) return vk_fail(v, VK_SUCCESS, "push constants of %u bytes", push_len);
	if (gx == 0 || gy == 0 || gz == 0) return 0;
	int e = main_begin(v);
	if (e) return e;
	VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
	ai.descriptorPool = v->dpools[v->cur];
	ai.descriptorSetCount = 1;
	ai.pSetLayouts = &v->set_layout[nbind];
	VkDescriptorSet set;
	VkResult r = v->vkAllocateDescriptorSets(v->device, &ai, &set);
	if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
		// The pool is full: run what was recorded, then start over.
		if ((e = spool_vk_submit(v)) || (e = main_begin(v))) return e;
		r = v->vkAllocateDescriptorSets(v->device, &ai, &set);
	}
	if (r != VK_SUCCESS) return vk_fail(v, r, "vkAllocateDescriptorSets");
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
	VkCommandBuffer cb = main_cb(v);
	v->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
	v->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, v->pipe_layout[nbind], 0, 1, &set, 0, NULL);
	if (push_len) v->vkCmdPushConstants(cb, v->pipe_layout[nbind], VK_SHADER_STAGE_COMPUTE_BIT, 0, push_len, push);
	v->vkCmdDispatch(cb, gx, gy, gz);
	return 0;
}

// Large copies into staging memory (uncached, write-combined on discrete
// GPUs) run on several threads: one core writes such memory at a fraction
// of what the bus takes. The threads are started once, on the first large
// copy, and live until the device closes: starting threads per copy maps
// and unmaps their stacks, which waits for every holder of the process's
// memory-map lock (a reader of /proc/self/smaps, say), and such waits made
// expert uploads ten times slower on the H200.
#define COPY_THREADS 8
#define COPY_SPLIT (1u << 20)

typedef struct {
	char *dst;
	const char *src;
	size_t n;
} copy_job;

struct copy_pool {
	pthread_mutex_t mu;
	pthread_cond_t start, done;
	pthread_t th[COPY_THREADS - 1];
	int nthreads;
	copy_job jobs[COPY_THREADS - 1]; // jobs[i] is thread i's part
	int njobs;                       // parts of the current copy the threads take
	unsigned gen;                    // bumped when a copy is handed out
	int pending;                     // parts not yet done
	int quit;
};

typedef struct {
	copy_pool *p;
	int index;
} copy_worker;

static void *copy_thread(void *arg) {
	copy_worker w = *(copy_worker *)arg;
	free(arg);
	copy_pool *p = w.p;
	unsigned seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->gen == seen) pthread_cond_wait(&p->start, &p->mu);
		if (p->quit) break;
		seen = p->gen;
		if (w.index >= p->njobs) continue;
		copy_job j = p->jobs[w.index];
		pthread_mutex_unlock(&p->mu);
		memcpy(j.dst, j.src, j.n);
		pthread_mutex_lock(&p->mu);
		if (--p->pending == 0) pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

// copy_pool_start starts the pool's threads (as many as start); NULL when
// none could be started or allocated.
static copy_pool *copy_pool_start(void) {
	copy_pool *p = calloc(1, sizeof *p);
	if (!p) return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
	for (int i = 0; i < COPY_THREADS - 1; i++) {
		copy_worker *w = malloc(sizeof *w);
		if (!w) break;
		*w = (copy_worker){p, i};
		if (pthread_create(&p->th[i], NULL, copy_thread, w) != 0) {
			free(w);
			break;
		}
		p->nthreads++;
	}
	if (p->nthreads == 0) {
		vk_copy_pool_stop(p);
		return NULL;
	}
	return p;
}

void vk_copy_pool_stop(copy_pool *p) {
	if (!p) return;
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nthreads; i++) pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->start);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

// parallel_memcpy copies n bytes in parts of at least COPY_SPLIT: the
// pool's threads take all but the last, which this thread copies.
static void parallel_memcpy(spool_vk *v, void *dst, const void *src, size_t n) {
	size_t parts = n / COPY_SPLIT;
	if (parts > COPY_THREADS) parts = COPY_THREADS;
	if (parts >= 2 && !v->copiers) v->copiers = copy_pool_start();
	copy_pool *p = v->copiers;
	if (p && parts > (size_t)p->nthreads + 1) parts = (size_t)p->nthreads + 1;
	if (parts < 2 || !p) {
		memcpy(dst, src, n);
		return;
	}
	size_t chunk = (n / parts + 63) & ~(size_t)63, off = 0;
	int handed = 0;
	pthread_mutex_lock(&p->mu);
	while (handed < (int)parts - 1 && n - off > chunk) {
		p->jobs[handed++] = (copy_job){(char *)dst + off, (const char *)src + off, chunk};
		off += chunk;
	}
	p->njobs = handed;
	p->pending = handed;
	p->gen++;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);
	memcpy((char *)dst + off, (const char *)src + off, n - off);
	pthread_mutex_lock(&p->mu);
	while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void spool_vk_stage_times(spool_vk *v, uint64_t *copy_ns, uint64_t *wait_ns) {
	*copy_ns = v->stage_copy_ns;
	*wait_ns = v->stage_wait_ns;
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
	uint64_t t0 = now_ns();
	int e2 = finish(v, &v->stage[v->stage_half]);
	v->stage_wait_ns += now_ns() - t0;
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
		uint64_t t0 = now_ns();
		parallel_memcpy(v, (char *)v->stage_map + at, p, c);
		v->stage_copy_ns += now_ns() - t0;
		VkBufferCopy bc = {at, dst_off, c};
		v->vkCmdCopyBuffer(s->cb, v->stage_buf->buffer, dst->buffer, 1, &bc);
		// Keep the next piece 16-byte aligned in staging.
		v->stage_fill += (c + 15) & ~(uint64_t)15;
		if (v->stage_fill > STAGE_HALF) v->stage_fill = STAGE_HALF;
		p += c, dst_off += c, n -= c;
	}
	return 0;
}

int spool_vk_stage_kick(spool_vk *v) {
	if (!v->stage[v->stage_half].recording) return 0;
	return stage_switch(v);
}

int spool_vk_stage_flush(spool_vk *v) {
	stream_t *s = &v->stage[v->stage_half];
	int e = 0;
	if (s->recording) e = run(v, s);
	uint64_t t0 = now_ns();
	int e0 = finish(v, &v->stage[0]), e1 = finish(v, &v->stage[1]);
	v->stage_wait_ns += now_ns() - t0;
	v->stage_fill = 0;
	return e ? e : e0 ? e0 : e1;
}
