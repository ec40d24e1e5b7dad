//go:build cgo

package kernels

// haveSIMD reports whether the NEON kernels of simd.c may run here: Advanced
// SIMD is part of every arm64 CPU.
func haveSIMD() bool { return true }

// simdISA is the only instruction set simd.c has on arm64 (NEON).
func simdISA() int { return 0 }

// Features names the instruction set the kernels use on this machine.
func Features() string { return "neon (cgo)" }
