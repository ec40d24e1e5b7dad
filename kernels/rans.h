// The decode loops of Spool's interleaved rANS coder over nibbles (see
// rans.go and engine/rans). Pointers are caller-owned; nothing is kept
// after return.
#ifndef SPOOL_KERNELS_RANS_H
#define SPOOL_KERNELS_RANS_H

#include <stdint.h>

// Decoders of spool_rans_decode: portable C (every target), AVX-512
// F/BW/VBMI/VBMI2 with BMI2 (amd64), AVX2 (amd64) and NEON
// (arm64, whatever isa says). All give identical results on any input.
#define SPOOL_RANS_SCALAR 0
#define SPOOL_RANS_AVX512 1
#define SPOOL_RANS_AVX2 2
#define SPOOL_RANS_NEON 3

// The decode table: Go's kernels.RANSTable, byte for byte.
typedef struct {
	uint8_t sym[128];
	uint8_t freq[16];
	uint8_t start[16];
} spool_rans_table;

// spool_rans_decode decodes the 2*nbytes nibbles of out from the 256 lane
// states and the renormalization bytes src[0, srclen), stopping early only
// when src runs out. It returns the nibbles decoded, sets *used to the
// bytes of src consumed and leaves the lane states in state.
long spool_rans_decode(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *state,
		       const spool_rans_table *t, long *used, int isa);

// spool_rans_encode codes the 2*nbytes nibbles of src under the nibble
// frequencies freq (summing to 128), lanes starting at 256: it writes the
// renormalization stream, in the order the decoder reads it, so that it
// ends at buf + cap (cap at least 2*nbytes + 1: a step may store a byte
// below the stream's start it does not keep), sets the 256 lane states to
// the encoder's final ones and returns the stream's length, or -1 when src
// holds a nibble of frequency 0. isa SPOOL_RANS_AVX512 codes 16 lanes a
// register (the CPU must have AVX-512 F/BW/VL/VBMI2); any other, portable
// C. Both give the same bytes.
long spool_rans_encode(uint8_t *buf, long cap, const uint8_t *src, long nbytes, const uint8_t *freq, uint16_t *state, int isa);

#endif
