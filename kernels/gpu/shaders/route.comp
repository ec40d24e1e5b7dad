#version 450
// The router after its logits: per row, sigmoid scores, the correction bias
// added for selection only (non-finite choices rank last), the top k by
// biased score (ties to the lower expert id), weights = the chosen
// unbiased scores, normalized when norm is set, times scale. One workgroup
// per row; at most 1024 experts and 64 chosen.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) writeonly buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Weights { float weights[]; };

layout(push_constant) uniform Push {
	uint E, k, norm;
	float scale;
} p;

shared float score[1024];
shared float choice[1024];
shared float bv[256];
shared uint bi[256];
shared uint chosen[64];

void main() {
	uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint tid = gl_LocalInvocationID.x;
	for (uint e = tid; e < p.E; e += 256u) {
		float s = 1.0 / (1.0 + exp(-logits[r * p.E + e]));
		float c = s + bias[e];
		if (isnan(c) || isinf(c)) c = -1e30;
		score[e] = s;
		choice[e] = c;
	}
	barrier();
	for (uint j = 0u; j < p.k; j++) {
		float v = -1.0 / 0.0;
		uint i = 0xffffffffu;
		for (uint e = tid; e < p.E; e += 256u) {
			float c = choice[e];
			if (i == 0xffffffffu || c > v) { v = c; i = e; }
		}
		bv[tid] = v;
		bi[tid] = i;
		barrier();
		for (uint h = 128u; h > 0u; h >>= 1) {
			if (tid < h) {
				float ov = bv[tid + h];
				uint oi = bi[tid + h];
				if (oi != 0xffffffffu && (bi[tid] == 0xffffffffu || ov > bv[tid] || (ov == bv[tid] && oi < bi[tid]))) {
					bv[tid] = ov;
					bi[tid] = oi;
				}
			}
			barrier();
		}
		if (tid == 0u) {
			chosen[j] = bi[0];
			choice[bi[0]] = -1.0 / 0.0; // taken
		}
		barrier();
	}
	if (tid == 0u) {
		float sum = 0.0;
		for (uint j = 0u; j < p.k; j++) sum += score[chosen[j]];
		for (uint j = 0u; j < p.k; j++) {
			float wj = score[chosen[j]];
			if (p.norm != 0u) wj /= sum + 1e-20;
			ids[r * p.k + j] = chosen[j];
			weights[r * p.k + j] = wj * p.scale;
		}
	}
}
