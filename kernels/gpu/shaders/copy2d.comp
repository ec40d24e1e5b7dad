#version 450
// dst[dOff + i*dLd + j] = src[sOff + i*sLd + j] for i < rows, j < cols.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };

layout(push_constant) uniform Push { uint rows, cols, sOff, sLd, dOff, dLd; } p;

void main() {
	uint j = gl_GlobalInvocationID.x;
	uint i = gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y;
	if (j >= p.cols || i >= p.rows) return;
	dst[p.dOff + i * p.dLd + j] = src[p.sOff + i * p.sLd + j];
}
