#version 450
// Masked softmax of attention scores, one workgroup per score row. Row g
// belongs to query row rowOff + g / heads; key t is visible when
// t <= limit[q] (mode 0, causal) or bit t of the query's mask is set
// (mode 1, a DSA selection). Hidden keys get probability 0.
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Scores { float s[]; };
layout(std430, binding = 1) readonly buffer Visible { uint vis[]; };

layout(push_constant) uniform Push {
	uint rows, T, ld, heads, mode, words, rowOff;
	float scale;
} p;

shared float red[256];

bool visible(uint q, uint t) {
	if (p.mode == 0u) return t <= vis[q];
	return ((vis[q * p.words + (t >> 5)] >> (t & 31u)) & 1u) != 0u;
}

void main() {
	uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	if (g >= p.rows) return;
	uint q = p.rowOff + g / p.heads;
	uint base = g * p.ld;
	uint tid = gl_LocalInvocationID.x;

	float mx = -1.0 / 0.0;
	for (uint t = tid; t < p.T; t += 256u) {
		if (visible(q, t)) mx = max(mx, s[base + t] * p.scale);
	}
	red[tid] = mx;
	barrier();
	for (uint h = 128u; h > 0u; h >>= 1) {
		if (tid < h) red[tid] = max(red[tid], red[tid + h]);
		barrier();
	}
	mx = red[0];
	barrier();

	float sum = 0.0;
	for (uint t = tid; t < p.T; t += 256u) {
		float e = 0.0;
		if (visible(q, t)) e = exp(s[base + t] * p.scale - mx);
		s[base + t] = e;
		sum += e;
	}
	red[tid] = sum;
	barrier();
	for (uint h = 128u; h > 0u; h >>= 1) {
		if (tid < h) red[tid] += red[tid + h];
		barrier();
	}
	float inv = red[0] > 0.0 ? 1.0 / red[0] : 0.0;
	for (uint t = tid; t < p.T; t += 256u) s[base + t] *= inv;
}
