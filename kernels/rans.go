package kernels

import (
	"slices"
	"strings"
)

// The decode loop of Spool's interleaved rANS coder (the format is
// engine/rans's). The alphabet is the 16 nibbles: byte i of a block is
// nibble 2i (its low four bits) then nibble 2i+1 (its high four bits), and
// nibble j is coded by lane j mod RANSLanes. Each lane's state is 16 bits,
// in [RANSLow, 2^16); a decode step of a lane reads the slot x mod 2^7,
// whose symbol s has frequency f and first slot c, moves the state to
// f*(x>>7) + slot - c and, when that falls below RANSLow, shifts in one
// byte of the renormalization stream, which the lanes read in lane order.
// A state in range stays in range for any stream, so every decoder, SIMD or
// not, computes the same thing on any input.
const (
	RANSLanes     = 256
	RANSSymbols   = 16
	RANSScaleBits = 7
	RANSTotal     = 1 << RANSScaleBits
	// RANSLow is the renormalization bound: a state below it after a
	// decode reads one byte.
	RANSLow = 1 << 8
)

// RANSTable is the decode table of one frequency table: the symbol of
// every slot, and every symbol's frequency and first slot. Frequencies sum
// to RANSTotal; a symbol of frequency 0 has no slot.
type RANSTable struct {
	Sym   [RANSTotal]uint8
	Freq  [RANSSymbols]uint8
	Start [RANSSymbols]uint8
}

// RANSDecode decodes the nibbles of len(out) bytes from the lane states
// and the renormalization bytes src, with the fastest loop this machine
// runs (the last of RANSLoops). It stops early only when src runs out: it
// returns the nibbles decoded (2*len(out) when it finished; the byte of a
// nibble left half done is not written) and the bytes of src consumed, and
// leaves the lane states in state. The caller checks the outcome: a coded
// block is decoded when every nibble is, src is consumed exactly and every
// state is back at RANSLow. Every state must start in [RANSLow, 2^16).
func RANSDecode(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (nibbles, used int) {
	return ransLoops[len(ransLoops)-1].decode(out, src, state, table)
}

// RANSLoop is one implementation of RANSDecode: the Go reference, or a
// loop of rans.c. All give identical results on any input.
type RANSLoop struct {
	name   string
	fast   bool
	decode func(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (int, int)
}

// Fast reports whether the loop, on the cores a machine has, decodes
// packed experts as fast as an SSD reads them, so that packed reads win:
// the SIMD loops, AVX-512 (2.2-3.4 GB/s of rebuilt bytes a core), AVX2
// (1-1.4 GB/s a core; the streamed tier spreads a record's blocks over
// every core) and NEON (the same in-register table lookups; not measured
// on Apple cores yet, see engine/speed). Portable C (0.14) and Go (0.04)
// are not: on those, packed reads cost more than they save.
func (l RANSLoop) Fast() bool {
	if l.decode == nil {
		return ransLoops[len(ransLoops)-1].fast
	}
	return l.fast
}

// String names the loop: "go", or rans.c's instruction set.
func (l RANSLoop) String() string {
	if l.decode == nil {
		return RANSFeatures()
	}
	return l.name
}

// Decode is RANSDecode with this loop; the zero RANSLoop is RANSDecode's.
func (l RANSLoop) Decode(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (nibbles, used int) {
	if l.decode == nil {
		return RANSDecode(out, src, state, table)
	}
	return l.decode(out, src, state, table)
}

// RANSLoops lists the decode loops this machine runs: the Go reference
// first, RANSDecode's last.
func RANSLoops() []RANSLoop { return slices.Clone(ransLoops) }

// RANSFeatures names the rANS decode loop this machine runs.
func RANSFeatures() string { return ransLoops[len(ransLoops)-1].name }

// RANSLoopEnv names the environment variable that makes a process decode
// as a machine whose best loop is the one it names ("go", "scalar",
// "avx2", ...: a prefix of the loop's name), read once at start: the test
// seam that runs an AVX-512 machine as an AVX2 one. A name this CPU has no
// loop for is ignored.
const RANSLoopEnv = "SPOOL_RANS_LOOP"

// limitRANSLoops drops the loops after the one name names.
func limitRANSLoops(loops []RANSLoop, name string) []RANSLoop {
	if name == "" {
		return loops
	}
	for i, l := range loops {
		if strings.HasPrefix(l.name, name) {
			return loops[:i+1]
		}
	}
	return loops
}

// goRANSLoop is the Go reference.
var goRANSLoop = RANSLoop{name: "go", decode: goRANSDecode}

// goRANSDecode is the portable RANSDecode, and the reference the SIMD
// loops must match on any input.
func goRANSDecode(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (nibbles, used int) {
	return goRANSDecodeFrom(out, src, state, table, 0, 0)
}

// goRANSDecodeFrom continues a decode from nibble j with p bytes of src
// consumed (SIMD loops finish their blocks with it).
func goRANSDecodeFrom(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable, j, p int) (nibbles, used int) {
	n := 2 * len(out)
	var lowNibble uint8
	for ; j < n; j++ {
		l := j % RANSLanes
		x := uint32(state[l])
		slot := x & (RANSTotal - 1)
		s := table.Sym[slot]
		v := uint32(table.Freq[s])*(x>>RANSScaleBits) + slot - uint32(table.Start[s])
		if v < RANSLow {
			if p >= len(src) {
				return j, p
			}
			v = v<<8 | uint32(src[p])
			p++
		}
		state[l] = uint16(v)
		if j&1 == 0 {
			lowNibble = s
		} else {
			out[j>>1] = lowNibble | s<<4
		}
	}
	return j, p
}

// RANSEncode is the encoder RANSDecode undoes: it codes the nibbles of src
// (byte i is nibble 2i, its low four bits, then nibble 2i+1) under the
// nibble frequencies freq, which sum to RANSTotal, every lane starting at
// RANSLow. It writes the renormalization bytes, in the order the decoder
// reads them, at the end of buf, which must hold 2*len(src)+1 bytes, and
// returns them (a suffix of buf), with state set to the lanes' final
// states (the decoder's initial ones). ok is false, and the rest
// meaningless, when src holds a nibble of frequency 0. It runs rans.c's
// encoder where cgo is on, else the Go reference; both give the same
// bytes.
func RANSEncode(buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) (stream []byte, ok bool) {
	if len(buf) < 2*len(src)+1 {
		panic("kernels: RANSEncode buffer too short")
	}
	return ransEncode(buf, src, freq, state)
}

// goRANSEncode is the portable RANSEncode, and the reference rans.c's
// encoder must match.
func goRANSEncode(buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) ([]byte, bool) {
	var start, rcp [RANSSymbols]uint32
	var acc uint32
	for s, f := range freq {
		start[s] = acc
		acc += uint32(f)
		if f > 0 {
			rcp[s] = ransReciprocal(uint32(f))
		}
	}
	var x [RANSLanes]uint32
	for l := range x {
		x[l] = RANSLow
	}
	p := len(buf)
	for j := 2*len(src) - 1; j >= 0; j-- {
		s := src[j>>1] >> (4 * (j & 1)) & 15
		f := uint32(freq[s])
		if f == 0 {
			return nil, false
		}
		l := j % RANSLanes
		v := x[l]
		// Coding s from a state below f * 2^9 stays below 2^16.
		if v >= f<<(16-RANSScaleBits) {
			p--
			buf[p] = byte(v)
			v >>= 8
		}
		q := ransQuotient(v, rcp[s])
		x[l] = q<<RANSScaleBits + v - q*f + start[s]
	}
	for l, v := range x {
		state[l] = uint16(v)
	}
	return buf[p:], true
}

// ransReciprocal and ransQuotient divide by multiplication, as both
// encoders do: for v < 2^16 and f <= RANSTotal, ransQuotient(v,
// ransReciprocal(f)) is v/f exactly, since v*ceil(2^24/f)/2^24 exceeds v/f
// by less than 2^-8 < 1/f.
func ransReciprocal(f uint32) uint32 { return (1<<24 + f - 1) / f }

func ransQuotient(v, r uint32) uint32 { return uint32(uint64(v) * uint64(r) >> 24) }
