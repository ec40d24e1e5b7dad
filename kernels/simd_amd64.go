//go:build cgo

package kernels

import "golang.org/x/sys/cpu"

// haveSIMD reports whether the AVX2+FMA kernels of simd.c may run here.
func haveSIMD() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// Features names the instruction set the kernels use on this machine.
func Features() string {
	if haveSIMD() {
		return "avx2+fma (cgo)"
	}
	return "generic (no avx2+fma)"
}
