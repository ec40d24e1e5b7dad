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

// encode_tail codes, with the scalar step, the nibbles after the last
// whole step (from the last), lanes' states in x.
static void encode_tail(const uint8_t *src, long nbytes, const sym_enc *t, uint32_t *x, uint8_t **pp) {
	long n = 2 * nbytes, full = n / LANES * LANES;
	for (long j = n - 1; j >= full; j--)
		enc(&x[j % LANES], &t[src[j >> 1] >> (4 * (j & 1)) & 15], pp);
}

static void encode_scalar(const uint8_t *src, long nbytes, const sym_enc *t, uint32_t *x, uint8_t **pp) {
	uint8_t *p = *pp;
	encode_tail(src, nbytes, t, x, &p);
	// Whole steps, from the last: lane 2i+1 codes the high nibble of the
	// step's byte i, lane 2i its low nibble.
	for (long k = 2 * nbytes / LANES - 1; k >= 0; k--) {
		const uint8_t *b = src + k * (LANES / 2);
		for (int i = LANES / 2 - 1; i >= 0; i--) {
			uint32_t v = b[i];
			enc(&x[2 * i + 1], &t[v >> 4], &p);
			enc(&x[2 * i], &t[v & 15], &p);
		}
	}
	*pp = p;
}

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2"))), \
			     apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2")
#endif

#include <immintrin.h>

// encode_avx512 codes whole steps 16 lanes a register (32-bit states, 16
// registers for the 256 lanes), from the last step and, within one, from
// the last group of lanes, each group's kept bytes compressed in lane
// order below the bytes already written. The division by f is a float
// product: floor((v + 0.5) / f) is exact for v < 2^16 and f <= 128, since
// (v + 0.5) / f lies at least 2^-8 from an integer and the float error is
// below 2^-14. Identical output to encode_scalar.
static void encode_avx512(const uint8_t *src, long nbytes, const sym_enc *t, uint32_t *xs, uint8_t **pp) {
	uint8_t *p = *pp;
	encode_tail(src, nbytes, t, xs, &p);
	uint32_t bound[16], gap[16], start[16];
	float inv[16];
	for (int s = 0; s < 16; s++) {
		uint32_t f = (t[s].bound >> 9);
		bound[s] = t[s].bound;
		gap[s] = t[s].gap;
		start[s] = t[s].start;
		inv[s] = f ? 1.0f / (float)f : 0.0f;
	}
	const __m512i Tb = _mm512_loadu_si512(bound), Tg = _mm512_loadu_si512(gap), Ts = _mm512_loadu_si512(start);
	const __m512 Ti = _mm512_loadu_ps(inv);
	const __m512i nib = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
	const __m512i m15 = _mm512_set1_epi32(15);
	const __m512 half = _mm512_set1_ps(0.5f);
	__m512i x[LANES / 16];
	for (int g = 0; g < LANES / 16; g++)
		x[g] = _mm512_loadu_si512(xs + 16 * g);
	for (long k = 2 * nbytes / LANES - 1; k >= 0; k--) {
		const uint8_t *b = src + k * (LANES / 2);
#pragma GCC unroll 16
		for (int g = LANES / 16 - 1; g >= 0; g--) {
			// Lanes 16g..16g+15 code the nibbles of bytes 8g..8g+7: each
			// byte twice, low nibble then high.
			__m128i by = _mm_loadl_epi64((const __m128i *)(const void *)(b + 8 * g));
			__m512i sv = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(by, by)), nib), m15);
			__m512i v = x[g];
			__mmask16 need = _mm512_cmpge_epu32_mask(v, _mm512_permutexvar_epi32(sv, Tb));
			unsigned n = (unsigned)__builtin_popcount(need);
			p -= n;
			_mm_mask_compressstoreu_epi8(p, need, _mm512_cvtepi32_epi8(v));
			v = _mm512_mask_srli_epi32(v, need, v, 8);
			__m512 vf = _mm512_add_ps(_mm512_cvtepi32_ps(v), half);
			__m512i q = _mm512_cvttps_epi32(_mm512_mul_ps(vf, _mm512_permutexvar_ps(sv, Ti)));
			x[g] = _mm512_add_epi32(_mm512_add_epi32(v, _mm512_mullo_epi32(q, _mm512_permutexvar_epi32(sv, Tg))),
						_mm512_permutexvar_epi32(sv, Ts));
		}
	}
	for (int g = 0; g < LANES / 16; g++)
		_mm512_storeu_si512(xs + 16 * g, x[g]);
	*pp = p;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif

long spool_rans_encode(uint8_t *buf, long cap, const uint8_t *src, long nbytes, const uint8_t *freq, uint16_t *state, int isa) {
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
#if defined(__x86_64__)
	if (isa == SPOOL_RANS_AVX512)
		encode_avx512(src, nbytes, t, x, &p);
	else
#endif
		encode_scalar(src, nbytes, t, x, &p);
	(void)isa;
	for (int l = 0; l < LANES; l++)
		state[l] = (uint16_t)x[l];
	return (long)(buf + cap - p);
}
