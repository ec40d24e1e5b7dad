//go:build cgo && (amd64 || arm64)

package kernels

/*
#include "rans.h"
*/
import "C"

import (
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// ransLoops is RANSLoops: the Go reference, then the loops of rans.c this
// CPU runs, the fastest last (or the one SPOOL_RANS_LOOP names). It is set
// once and only read.
var ransLoops = limitRANSLoops(append([]RANSLoop{goRANSLoop}, cRANSLoops()...), os.Getenv(RANSLoopEnv))

// cRANSLoops lists the loops of rans.c this CPU runs: portable C, then
// AVX2 and AVX-512 with VBMI2 and BMI2 where the CPU has them, or NEON on
// arm64.
func cRANSLoops() []RANSLoop {
	isas := []int{C.SPOOL_RANS_SCALAR}
	if runtime.GOARCH == "arm64" {
		isas = append(isas, C.SPOOL_RANS_NEON)
	} else {
		x := cpu.X86
		if x.HasAVX2 && x.HasPOPCNT {
			isas = append(isas, C.SPOOL_RANS_AVX2)
		}
		if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VBMI && x.HasAVX512VBMI2 && x.HasBMI2 && x.HasPOPCNT {
			isas = append(isas, C.SPOOL_RANS_AVX512)
		}
	}
	names := map[int]string{
		C.SPOOL_RANS_SCALAR: "scalar C (cgo)",
		C.SPOOL_RANS_AVX2:   "avx2 (cgo)",
		C.SPOOL_RANS_AVX512: "avx512 vbmi2 (cgo)",
		C.SPOOL_RANS_NEON:   "neon (cgo)",
	}
	var loops []RANSLoop
	for _, isa := range isas {
		fast := isa != C.SPOOL_RANS_SCALAR
		loops = append(loops, RANSLoop{name: names[isa], fast: fast, decode: func(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (int, int) {
			return ransDecodeISA(out, src, state, table, isa)
		}})
	}
	return loops
}

// ransEncodeISA is the encoder rans_encode.c runs: AVX-512 where this
// process decodes with the AVX-512 loop (and the CPU has VL), else
// portable C. It is set once and only read.
var ransEncodeISA = func() int {
	if strings.HasPrefix(ransLoops[len(ransLoops)-1].name, "avx512") && cpu.X86.HasAVX512VL {
		return C.SPOOL_RANS_AVX512
	}
	return C.SPOOL_RANS_SCALAR
}()

// ransEncoders lists rans_encode.c's encoders this CPU runs, portable C
// first (tests compare them).
func ransEncoders() map[string]int {
	out := map[string]int{"scalar": C.SPOOL_RANS_SCALAR}
	if ransEncodeISA == C.SPOOL_RANS_AVX512 {
		out["avx512"] = C.SPOOL_RANS_AVX512
	}
	return out
}

// ransEncode is RANSEncode's implementation: rans_encode.c's.
func ransEncode(buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) ([]byte, bool) {
	return ransEncodeWith(ransEncodeISA, buf, src, freq, state)
}

func ransEncodeWith(isa int, buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) ([]byte, bool) {
	if len(src) == 0 {
		for l := range state {
			state[l] = RANSLow
		}
		return buf[len(buf):], true
	}
	n := C.spool_rans_encode((*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(buf))), C.long(len(buf)),
		(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(src))), C.long(len(src)),
		(*C.uint8_t)(unsafe.Pointer(&freq[0])), (*C.uint16_t)(unsafe.Pointer(&state[0])), C.int(isa))
	if n < 0 {
		return nil, false
	}
	return buf[len(buf)-int(n):], true
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
