//go:build cgo

package kernels

import "golang.org/x/sys/cpu"

// Decoder choices, the SPOOL_ISA_* values of simd.h.
const (
	isaAVX2   = 0
	isaAVX512 = 1
)

// haveSIMD reports whether the AVX2+FMA kernels of simd.c may run here.
func haveSIMD() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// int4Decoder picks the int4 decoder of simd.c: the AVX-512VL permute where
// the CPU has it, else AVX2 shifts (bit-identical results either way).
func int4Decoder() int {
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL {
		return isaAVX512
	}
	return isaAVX2
}

// Features names the instruction set the kernels use on this machine.
func Features() string {
	switch {
	case haveSIMD() && int4Decoder() == isaAVX512:
		return "avx2+fma, avx512vl int4 decode (cgo)"
	case haveSIMD():
		return "avx2+fma (cgo)"
	}
	return "generic (no avx2+fma)"
}
