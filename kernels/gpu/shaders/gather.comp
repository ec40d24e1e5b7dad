#version 450
// dst[i*cols + j] = src[list[listOff + i]*cols + j] for i < rows, j < cols:
// the cache rows of DSA selections gathered into one block.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) readonly buffer List { uint list[]; };
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };

layout(push_constant) uniform Push { uint rows, cols, listOff; } p;

void main() {
	uint j = gl_GlobalInvocationID.x;
	uint i = gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y;
	if (j >= p.cols || i >= p.rows) return;
	dst[i * p.cols + j] = src[list[p.listOff + i] * p.cols + j];
}
