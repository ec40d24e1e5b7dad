//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

import (
	"embed"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The SPIR-V of shaders/*.comp, compiled by scripts/compile-shaders.sh
// (make shaders); a build without it fails here, naming the pattern.
//
//go:embed spv/*.spv
var spirv embed.FS

type shader struct {
	name  string
	nbind int
}

var (
	shGemm       = shader{"gemm", 6}
	shSoftmax    = shader{"softmax", 2}
	shRoute      = shader{"route", 4}
	shSiluMul    = shader{"silu_mul", 2}
	shAccumulate = shader{"accumulate", 4}
	shAdd        = shader{"add", 2}
	shCopy2D     = shader{"copy2d", 2}
	shGather     = shader{"gather", 3}
)

// pipeKey names a pipeline: a shader and its specialization constants.
type pipeKey struct {
	name string
	spec [6]uint32
}

// pipeline returns the pipeline of sh specialized with spec, building it
// on first use.
func (d *Device) pipeline(sh shader, spec ...uint32) (C.int, error) {
	k := pipeKey{name: sh.name}
	copy(k.spec[:], spec)
	if id, ok := d.pipes[k]; ok {
		return id, nil
	}
	code, err := spirv.ReadFile("spv/" + sh.name + ".spv")
	if err != nil {
		return 0, fmt.Errorf("gpu: shader %s: %w", sh.name, err)
	}
	if len(code)%4 != 0 || len(code) < 20 || binary.LittleEndian.Uint32(code) != 0x07230203 {
		return 0, fmt.Errorf("gpu: shader %s is not SPIR-V", sh.name)
	}
	words := make([]uint32, len(code)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(code[4*i:])
	}
	var sp *C.uint32_t
	if len(spec) > 0 {
		sp = (*C.uint32_t)(unsafe.Pointer(&spec[0]))
	}
	var id C.int
	if rc := C.spool_vk_pipeline(d.v, (*C.uint32_t)(unsafe.Pointer(&words[0])), C.size_t(len(code)), C.int(sh.nbind), sp, C.int(len(spec)), &id); rc != 0 {
		return 0, d.lastError("pipeline "+sh.name, rc)
	}
	d.pipes[k] = id
	return id, nil
}
