package kernels

import "encoding/binary"

// The decode loop of Spool's interleaved rANS coder (the format is
// engine/rans's): RANSLanes states decode round-robin, lane l of step t
// producing byte 32t+l; each state is 32 bits, renormalized by 16-bit
// words read in lane order from one shared stream, with probabilities of
// RANSScaleBits bits.
const (
	RANSLanes     = 32
	RANSScaleBits = 12
	// RANSLow is the renormalization bound: a state below it after a
	// decode reads one word.
	RANSLow = 1 << 16
)

// RANSTable is the decode table: entry slot packs the symbol in bits 0-7,
// its frequency minus one in bits 8-19 and slot minus the symbol's first
// slot in bits 20-31.
type RANSTable [1 << RANSScaleBits]uint32

// RANSDecodeSteps decodes whole steps into out (at most len(out)/32 of
// them), starting from state and reading words (little-endian uint16
// pairs) from src. It stops before a step while fewer than RANSLanes
// words remain, so it never reads past src; the caller finishes the tail
// with its own bounds checks. It returns the steps decoded and the bytes
// of src consumed, and leaves the states in state.
func RANSDecodeSteps(out []byte, src []byte, state *[RANSLanes]uint32, table *RANSTable) (steps, used int) {
	return ransDecodeSteps(out, src, state, table)
}

// goRANSDecodeSteps is the portable RANSDecodeSteps.
func goRANSDecodeSteps(out []byte, src []byte, state *[RANSLanes]uint32, table *RANSTable) (steps, used int) {
	n := len(out) / RANSLanes
	x := *state
	p := 0
	t := 0
	for ; t < n && len(src)-p >= 2*RANSLanes; t++ {
		o := out[t*RANSLanes : (t+1)*RANSLanes : (t+1)*RANSLanes]
		for l := range x {
			e := table[x[l]&(1<<RANSScaleBits-1)]
			o[l] = byte(e)
			v := (e>>8&(1<<RANSScaleBits-1)+1)*(x[l]>>RANSScaleBits) + e>>20
			// Branch-free: whether a lane renormalizes is data, not a
			// pattern a branch predictor learns.
			need := uint32((uint64(v) - RANSLow) >> 63) // 1 iff v < RANSLow
			m := -need
			w := uint32(binary.LittleEndian.Uint16(src[p:]))
			x[l] = (v<<16|w)&m | v&^m
			p += 2 * int(need)
		}
	}
	*state = x
	return t, p
}
