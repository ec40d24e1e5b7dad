#version 450
// The routed experts' sum per row: out[r] += sum_j w[r][j] * eo[slot j of
// row r], the k slots taken in the order perm gives (ascending expert id),
// summed first and then added to out (which holds the shared expert's
// output, or zeros).
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Out { float outv[]; };
layout(std430, binding = 1) readonly buffer ExpertOut { float eo[]; };
layout(std430, binding = 2) readonly buffer Perm { uint perm[]; };
layout(std430, binding = 3) readonly buffer W { float wt[]; };

layout(push_constant) uniform Push { uint R, H, k; } p;

void main() {
	uint d = gl_GlobalInvocationID.x;
	uint r = gl_WorkGroupID.y;
	if (d >= p.H || r >= p.R) return;
	float acc = 0.0;
	for (uint j = 0u; j < p.k; j++) {
		uint slot = perm[r * p.k + j];
		acc += wt[r * p.k + j] * eo[(r * p.k + slot) * p.H + d];
	}
	outv[r * p.H + d] = acc + outv[r * p.H + d];
}
