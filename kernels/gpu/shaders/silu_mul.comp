#version 450
// g[i] = silu(g[i]) * u[i], the gated MLP's activation.
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };

layout(push_constant) uniform Push { uint n; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
	if (i >= p.n) return;
	float x = g[i];
	g[i] = x / (1.0 + exp(-x)) * u[i];
}
