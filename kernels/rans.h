// The decode loop of Spool's interleaved rANS coder (see rans.go and
// engine/rans). Pointers are caller-owned; nothing is kept after return.
#ifndef SPOOL_KERNELS_RANS_H
#define SPOOL_KERNELS_RANS_H

#include <stdint.h>

// Decoders of spool_rans_decode: portable C (every target), AVX-512
// F/BW/VL (amd64). Both give identical results.
#define SPOOL_RANS_SCALAR 0
#define SPOOL_RANS_AVX512 1

// spool_rans_decode decodes up to steps steps of 32 lanes into out (32
// bytes a step), stopping before a step while fewer than 32 words remain
// in src[0, srclen). It returns the steps decoded, sets *used to the bytes
// of src consumed and leaves the lane states in state.
long spool_rans_decode(uint8_t *out, long steps, const uint8_t *src, long srclen, uint32_t *state,
		       const uint32_t *table, long *used, int isa);

#endif
