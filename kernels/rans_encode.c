//go:build cgo && (amd64 || arm64)

// The encoder of the interleaved rANS coder over nibbles (rans.go has the
// format; engine/rans's Encode the API). Encoding runs the decoder
// backwards: nibbles from the last to the first, each lane's state moved
// by its nibble, a lane about to leave 16 bits first shifting its low byte
// out. The bytes come out in the reverse of the order the decoder reads
// them, so they are written from the end of the buffer down.

#include "rans.h"

#define LANES 256
#define LOW 256u

// sym_enc is what coding a nibble needs of its symbol: the state from
// which it renormalizes first (f * 2^9), the reciprocal that divides by f
// (ceil(2^24/f): for v < 2^16 and f <= 128, v * rcp >> 24 is v/f exactly,
// since the overshoot is below 2^-8 of one v), and the slot arithmetic:
// x' = q*2^7 + (v - q*f) + start = v + q*(128 - f) + start.
typedef struct {
	uint32_t bound, rcp, gap, start;
} sym_enc;

// enc codes nibble s in the lane whose state is *xp, storing its low byte
// below *pp whether or not it is kept (no branch depends on the data).
static inline __attribute__((always_inline)) void enc(uint32_t *xp, const sym_enc *e, uint8_t **pp) {
	uint32_t v = *xp, need = v >= e->bound;
	uint8_t *p = *pp;
	p[-1] = (uint8_t)v;
	*pp = p - need;
	v = need ? v >> 8 : v;
	uint32_t q = (uint32_t)(((uint64_t)v * e->rcp) >> 24);
	*xp = v + q * e->gap + e->start;
}

long spool_rans_encode(uint8_t *buf, long cap, const uint8_t *src, long nbytes, const uint8_t *freq, uint16_t *state) {
	sym_enc t[16];
	uint32_t x[LANES], acc = 0, zero = 0;
	for (int s = 0; s < 16; s++) {
		uint32_t f = freq[s];
		t[s] = (sym_enc){f << 9, f ? ((1u << 24) + f - 1) / f : 0, 128 - f, acc};
		acc += f;
		zero |= (f == 0) << s;
	}
	// Refuse a nibble of frequency 0 before coding anything.
	if (zero) {
		uint32_t seen = 0;
		for (long i = 0; i < nbytes; i++)
			seen |= 1u << (src[i] & 15) | 1u << (src[i] >> 4);
		if (seen & zero)
			return -1;
	}
	for (int l = 0; l < LANES; l++)
		x[l] = LOW;
	uint8_t *p = buf + cap;
	long n = 2 * nbytes, full = n / LANES * LANES;
	// The nibbles after the last whole step, from the last.
	for (long j = n - 1; j >= full; j--)
		enc(&x[j % LANES], &t[src[j >> 1] >> (4 * (j & 1)) & 15], &p);
	// Whole steps, from the last: lane 2i+1 codes the high nibble of the
	// step's byte i, lane 2i its low nibble.
	for (long k = full / LANES - 1; k >= 0; k--) {
		const uint8_t *b = src + k * (LANES / 2);
		for (int i = LANES / 2 - 1; i >= 0; i--) {
			uint32_t v = b[i];
			enc(&x[2 * i + 1], &t[v >> 4], &p);
			enc(&x[2 * i], &t[v & 15], &p);
		}
	}
	for (int l = 0; l < LANES; l++)
		state[l] = (uint16_t)x[l];
	return (long)(buf + cap - p);
}
