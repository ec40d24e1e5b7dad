// Package gpu is the Vulkan compute backend of the engine: int4 (per-row
// and grouped) and int8 matrix products over many rows, the gated MLP, the
// router and the routed experts of a MoE layer, and MLA attention of a
// prefill chunk over the compressed KV cache. Host code is C (vk.c) through
// cgo; kernels are GLSL (shaders/) compiled to SPIR-V by glslc and embedded.
// On macOS it runs on Metal through MoltenVK.
//
// Results agree with the CPU kernels of package kernels within float32
// rounding (the GPU sums in another order), not bit for bit.
//
// The real backend needs the build tag vulkan, cgo and the SPIR-V files
// (make shaders, or go generate ./kernels/gpu, which need glslc); other
// builds get Open returning ErrUnavailable. The Vulkan loader is opened at
// run time, so a machine without Vulkan gets an error from Open, never a
// binary that fails to start.
//
// A Device serializes its operations; it holds no package-level state and
// starts no goroutines.
package gpu

//go:generate sh ../../scripts/compile-shaders.sh shaders spv
