#version 450
// out[i] = a[i] + out[i] for i < n: the routed experts' sums added to the
// shared expert's output (or to zeros).
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Out { float outv[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };

layout(push_constant) uniform Push { uint n; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
	if (i >= p.n) return;
	outv[i] = a[i] + outv[i];
}
