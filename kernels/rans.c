//go:build cgo && (amd64 || arm64)

// Decode loops of the interleaved rANS coder: 32 lanes, 32-bit states,
// 16-bit renormalization words read in lane order, 12-bit probabilities.
// Table entries pack sym | (freq-1) << 8 | (slot - start) << 20. Each
// loop runs a step only while at least 32 words remain, so no step reads
// past the stream.

#include "rans.h"

#include <string.h>

#define LANES 32
#define MASK 4095u
#define LOW 65536u

static inline uint32_t ld16(const uint8_t *p) {
	uint16_t v;
	memcpy(&v, p, 2); // both targets are little-endian
	return v;
}

static long rans_scalar(uint8_t *out, long steps, const uint8_t *src, long srclen, uint32_t *state,
			const uint32_t *tab, long *used) {
	uint32_t x[LANES];
	memcpy(x, state, sizeof x);
	long p = 0, t = 0;
	for (; t < steps && srclen - p >= 2 * LANES; t++) {
		uint8_t *o = out + t * LANES;
		for (int l = 0; l < LANES; l++) {
			uint32_t e = tab[x[l] & MASK];
			o[l] = (uint8_t)e;
			uint32_t v = (((e >> 8) & MASK) + 1) * (x[l] >> 12) + (e >> 20);
			// Branch-free: whether a lane renormalizes is data, not a
			// pattern a branch predictor learns.
			uint32_t need = v < LOW;
			uint32_t m = 0u - need;
			uint32_t w = ld16(src + p);
			x[l] = (((v << 16) | w) & m) | (v & ~m);
			p += 2 * (long)need;
		}
	}
	memcpy(state, x, sizeof x);
	*used = p;
	return t;
}

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,avx512f,avx512bw,avx512vl,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,avx512f,avx512bw,avx512vl,popcnt")
#endif

#include <immintrin.h>

// step16 decodes one step of 16 lanes held in *x, writing 16 bytes at o and
// reading words at *p.
static inline __attribute__((always_inline)) void step16(__m512i *x, uint8_t *o, const uint8_t *src, long *p,
							 const uint32_t *tab) {
	const __m512i mask = _mm512_set1_epi32((int)MASK);
	__m512i e = _mm512_i32gather_epi32(_mm512_and_si512(*x, mask), (const void *)tab, 4);
	_mm_storeu_si128((__m128i *)(void *)o, _mm512_cvtepi32_epi8(e));
	__m512i f = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), mask), _mm512_set1_epi32(1));
	__m512i v = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(*x, 12)), _mm512_srli_epi32(e, 20));
	__mmask16 need = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32((int)LOW));
	__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(src + *p)));
	w = _mm512_maskz_expand_epi32(need, w);
	*x = _mm512_mask_or_epi32(v, need, _mm512_slli_epi32(v, 16), w);
	*p += 2 * __builtin_popcount((unsigned)need);
}

static long rans_avx512(uint8_t *out, long steps, const uint8_t *src, long srclen, uint32_t *state,
			const uint32_t *tab, long *used) {
	__m512i x0 = _mm512_loadu_si512((const void *)state);
	__m512i x1 = _mm512_loadu_si512((const void *)(state + 16));
	long p = 0, t = 0;
	for (; t < steps && srclen - p >= 2 * LANES; t++) {
		uint8_t *o = out + t * LANES;
		step16(&x0, o, src, &p, tab);
		step16(&x1, o + 16, src, &p, tab);
	}
	_mm512_storeu_si512((void *)state, x0);
	_mm512_storeu_si512((void *)(state + 16), x1);
	*used = p;
	return t;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif

long spool_rans_decode(uint8_t *out, long steps, const uint8_t *src, long srclen, uint32_t *state,
		       const uint32_t *table, long *used, int isa) {
#if defined(__x86_64__)
	if (isa == SPOOL_RANS_AVX512)
		return rans_avx512(out, steps, src, srclen, state, table, used);
#endif
	(void)isa;
	return rans_scalar(out, steps, src, srclen, state, table, used);
}
