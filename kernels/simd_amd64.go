//go:build cgo

package kernels

import "golang.org/x/sys/cpu"

// Instruction sets of simd.c, the SPOOL_ISA_* values of simd.h.
const (
	isaAVX2   = 0
	isaAVX512 = 1
)

// haveSIMD reports whether the AVX2+FMA kernels of simd.c may run here.
func haveSIMD() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// haveAVX512 reports whether the AVX-512 kernels may run here: they need
// F, VL, BW, DQ and VBMI (vpmultishiftqb decodes the int4 nibbles).
func haveAVX512() bool {
	x := cpu.X86
	return haveSIMD() && x.HasAVX512F && x.HasAVX512VL && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VBMI
}

// simdISA picks the instruction set of simd.c: AVX-512 where the CPU has
// it, else AVX2 (bit-identical results either way).
func simdISA() int {
	if haveAVX512() {
		return isaAVX512
	}
	return isaAVX2
}

// Features names the instruction set the kernels use on this machine.
func Features() string {
	switch {
	case haveAVX512():
		return "avx512 f/vl/bw/dq/vbmi (cgo)"
	case haveSIMD():
		return "avx2+fma (cgo)"
	}
	return "generic (no avx2+fma)"
}
