#version 450
// The routed experts' weighted outputs of one batch of experts added to
// each row's running sum: for the batch's rows r < R (row ids[r]), acc of
// that row += w[j] * eo[local[j]] for its entries j = start[r] ..
// start[r+1]-1, one after another in the order the host listed them
// (ascending expert id). Batches come in ascending expert order, so each
// row's sum takes its experts in that order, as a single sum over all of
// them would.
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Acc { float acc[]; };
layout(std430, binding = 1) readonly buffer ExpertOut { float eo[]; };
layout(std430, binding = 2) readonly buffer Lists { uint lists[]; }; // ids [R], start [R+1], local [entries]
layout(std430, binding = 3) readonly buffer W { float wt[]; };

layout(push_constant) uniform Push { uint R, H; } p;

void main() {
	uint d = gl_GlobalInvocationID.x;
	uint r = gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y;
	if (d >= p.H || r >= p.R) return;
	uint i = lists[r] * p.H + d;
	float a = acc[i];
	uint end = lists[p.R + r + 1];
	for (uint j = lists[p.R + r]; j < end; j++) {
		a += wt[j] * eo[lists[2u * p.R + 1u + j] * p.H + d];
	}
	acc[i] = a;
}
