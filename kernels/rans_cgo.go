//go:build cgo && (amd64 || arm64)

package kernels

/*
#include "rans.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// ransISA picks the decode loop of rans.c: AVX-512 with VBMI2 and BMI2
// where the CPU has them, NEON on arm64, else portable C.
func ransISA() int {
	if runtime.GOARCH == "arm64" {
		return C.SPOOL_RANS_NEON
	}
	x := cpu.X86
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VBMI && x.HasAVX512VBMI2 && x.HasBMI2 && x.HasPOPCNT {
		return C.SPOOL_RANS_AVX512
	}
	return C.SPOOL_RANS_SCALAR
}

// ransISAs lists the decode loops this CPU can run, portable C first.
func ransISAs() []int {
	if isa := ransISA(); isa != C.SPOOL_RANS_SCALAR {
		return []int{C.SPOOL_RANS_SCALAR, isa}
	}
	return []int{C.SPOOL_RANS_SCALAR}
}

// ransISAName names a decode loop of rans.c.
func ransISAName(isa int) string {
	switch isa {
	case C.SPOOL_RANS_AVX512:
		return "avx512 vbmi2 (cgo)"
	case C.SPOOL_RANS_AVX2:
		return "avx2 (cgo)"
	case C.SPOOL_RANS_NEON:
		return "neon (cgo)"
	}
	return "scalar C (cgo)"
}

// RANSFeatures names the rANS decode loop this machine runs.
func RANSFeatures() string { return ransISAName(ransISA()) }

func ransDecode(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (int, int) {
	return ransDecodeISA(out, src, state, table, ransISA())
}

func ransDecodeISA(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable, isa int) (int, int) {
	if len(out) == 0 {
		return 0, 0
	}
	var used C.long
	n := C.spool_rans_decode((*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(out))), C.long(len(out)),
		(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(src))), C.long(len(src)),
		(*C.uint16_t)(unsafe.Pointer(&state[0])), (*C.spool_rans_table)(unsafe.Pointer(table)), &used, C.int(isa))
	return int(n), int(used)
}
