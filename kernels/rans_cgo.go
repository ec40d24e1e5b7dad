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

// ransISA picks the decode loop of rans.c: AVX-512 F/BW/VL where the CPU
// has it, else portable C.
func ransISA() int {
	x := cpu.X86
	if runtime.GOARCH == "amd64" && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasPOPCNT {
		return C.SPOOL_RANS_AVX512
	}
	return C.SPOOL_RANS_SCALAR
}

// RANSFeatures names the rANS decode loop this machine runs.
func RANSFeatures() string {
	if ransISA() == C.SPOOL_RANS_AVX512 {
		return "avx512 f/bw/vl (cgo)"
	}
	return "scalar C (cgo)"
}

func ransDecodeSteps(out []byte, src []byte, state *[RANSLanes]uint32, table *RANSTable) (int, int) {
	return ransDecodeStepsISA(out, src, state, table, ransISA())
}

func ransDecodeStepsISA(out []byte, src []byte, state *[RANSLanes]uint32, table *RANSTable, isa int) (int, int) {
	steps := len(out) / RANSLanes
	if steps == 0 || len(src) < 2*RANSLanes {
		return 0, 0
	}
	var used C.long
	n := C.spool_rans_decode((*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(out))), C.long(steps),
		(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(src))), C.long(len(src)),
		(*C.uint32_t)(unsafe.Pointer(&state[0])), (*C.uint32_t)(unsafe.Pointer(&table[0])), &used, C.int(isa))
	return int(n), int(used)
}
