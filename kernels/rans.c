//go:build cgo && (amd64 || arm64)

// Decode loops of the interleaved rANS coder over nibbles (rans.go has the
// format and the Go reference): 256 lanes of 16-bit states, 7-bit
// probabilities, one renormalization byte at most per decode, read in lane
// order. Each loop runs whole steps without bounds checks only while at
// least LANES bytes remain (a step reads at most one per lane), then
// finishes in rans_checked, which stops where the bytes run out.

#include "rans.h"

#include <string.h>

#define LANES 256
#define MASK 127u
#define LOW 256u

// rans_lane decodes one nibble of the lane whose state is *xp, reading the
// byte at src[*p] (which must exist) whether or not it is needed: without a
// branch, since whether a lane renormalizes is data, not a pattern a branch
// predictor learns.
static inline uint32_t rans_lane(uint16_t *xp, const uint8_t *src, long *p, const spool_rans_table *t) {
	uint32_t x = *xp, slot = x & MASK, s = t->sym[slot];
	uint32_t v = t->freq[s] * (x >> 7) + slot - t->start[s];
	uint32_t need = v < LOW;
	*xp = (uint16_t)(v << (8 * need) | (src[*p] & (0u - need)));
	*p += need;
	return s;
}

// rans_checked decodes nibbles [j, 2*nbytes) (j even) with p bytes of src
// consumed, stopping before a nibble that needs a byte when none is left.
static long rans_checked(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *x,
			 const spool_rans_table *t, long j, long *used) {
	long n = 2 * nbytes, p = *used;
	uint32_t lo = 0;
	for (; j < n; j++) {
		uint32_t xl = x[j % LANES], slot = xl & MASK, s = t->sym[slot];
		uint32_t v = t->freq[s] * (xl >> 7) + slot - t->start[s];
		if (v < LOW) {
			if (p >= srclen)
				break;
			v = v << 8 | src[p++];
		}
		x[j % LANES] = (uint16_t)v;
		if (j & 1)
			out[j >> 1] = (uint8_t)(lo | s << 4);
		else
			lo = s;
	}
	*used = p;
	return j;
}

static long rans_scalar(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *x,
			const spool_rans_table *t, long *used) {
	long steps = 2 * nbytes / LANES, k = 0, p = 0;
	for (; k < steps && srclen - p >= LANES; k++) {
		uint8_t *o = out + k * (LANES / 2);
		for (int l = 0; l < LANES; l += 2) {
			uint32_t s0 = rans_lane(&x[l], src, &p, t);
			uint32_t s1 = rans_lane(&x[l + 1], src, &p, t);
			o[l / 2] = (uint8_t)(s0 | s1 << 4);
		}
	}
	*used = p;
	return rans_checked(out, nbytes, src, srclen, x, t, k * LANES, used);
}

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2"))), \
			     apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2")
#endif

#include <immintrin.h>

#define EVEN 0x5555555555555555ull // the low byte of every 16-bit lane

// A zmm holds 32 lanes; a step is G of them.
#define G (LANES / 32)

typedef struct {
	__m512i sym0, sym1; // slots 0-63, 64-127
	__m512i freq, start; // by symbol, in every 128-bit lane (vpshufb)
} avx512_tab;

// avx512_next decodes the nibbles of 32 lanes: their symbols (the low
// byte of each 16-bit lane, the high byte zero) into *s, the states before
// renormalization returned, the lanes that need a byte in *need.
static inline __attribute__((always_inline)) __m512i avx512_next(__m512i x, const avx512_tab *T, __m512i *s,
								  __mmask32 *need) {
	*s = _mm512_maskz_permutex2var_epi8(EVEN, T->sym0, x, T->sym1);
	__m512i f = _mm512_maskz_shuffle_epi8(EVEN, T->freq, *s);
	__m512i c = _mm512_maskz_shuffle_epi8(EVEN, T->start, *s);
	__m512i slot = _mm512_and_si512(x, _mm512_set1_epi16((short)MASK));
	__m512i v = _mm512_mullo_epi16(f, _mm512_srli_epi16(x, 7));
	v = _mm512_sub_epi16(_mm512_add_epi16(v, slot), c);
	*need = _mm512_cmplt_epu16_mask(v, _mm512_set1_epi16((short)LOW));
	return v;
}

static long rans_avx512(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *state,
			const spool_rans_table *t, long *used) {
	avx512_tab T;
	T.sym0 = _mm512_loadu_si512((const void *)t->sym);
	T.sym1 = _mm512_loadu_si512((const void *)(t->sym + 64));
	T.freq = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)t->freq));
	T.start = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)t->start));
	// Output: vpmaddwd turns each pair of nibble lanes into a byte in a
	// 32-bit lane; pick puts the bytes of two such vectors in order.
	const __m512i pair = _mm512_set1_epi32(1 | 16 << 16);
	static const uint8_t pickIdx[64] = {
		0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84,
		88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 0, 4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44,
		48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124,
	};
	const __m512i pick = _mm512_loadu_si512((const void *)pickIdx);
	__m512i x[G];
	for (int g = 0; g < G; g++)
		x[g] = _mm512_loadu_si512((const void *)(state + 32 * g));
	long steps = 2 * nbytes / LANES, k = 0, p = 0, j;
	for (; k < steps && srclen - p >= LANES; k++) {
		uint8_t *o = out + k * (LANES / 2);
		__m512i d[G];
		for (int g = 0; g < G; g++) {
			__m512i s;
			__mmask32 need;
			__m512i v = avx512_next(x[g], &T, &s, &need);
			// Each group reads at most 32 bytes: the step's check covers it.
			__m512i in = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(src + p)));
			x[g] = _mm512_mask_expand_epi8(_mm512_mask_slli_epi16(v, need, v, 8), _pdep_u64(need, EVEN), in);
			p += __builtin_popcount(need);
			d[g] = _mm512_madd_epi16(s, pair);
		}
		for (int g = 0; g < G; g += 4) {
			__m512i lo = _mm512_permutex2var_epi8(d[g], pick, d[g + 1]);
			__m512i hi = _mm512_permutex2var_epi8(d[g + 2], pick, d[g + 3]);
			_mm512_storeu_si512((void *)(o + 16 * g), _mm512_mask_blend_epi64(0xF0, lo, hi));
		}
	}
	// The last whole steps: each group checks its bytes remain and loads
	// exactly those (masked loads read nothing past them).
	for (; k < steps; k++) {
		uint8_t *o = out + k * (LANES / 2);
		for (int g = 0; g < G; g++) {
			__m512i s;
			__mmask32 need;
			__m512i v = avx512_next(x[g], &T, &s, &need);
			long n = __builtin_popcount(need);
			if (srclen - p < n) {
				j = k * LANES + 32 * g;
				goto tail;
			}
			x[g] = _mm512_mask_expandloadu_epi8(_mm512_mask_slli_epi16(v, need, v, 8), _pdep_u64(need, EVEN),
							    (const void *)(src + p));
			p += n;
			_mm_storeu_si128((__m128i *)(void *)(o + 16 * g), _mm512_cvtepi32_epi8(_mm512_madd_epi16(s, pair)));
		}
	}
	j = k * LANES;
tail:
	for (int g = 0; g < G; g++)
		_mm512_storeu_si512((void *)(state + 32 * g), x[g]);
	*used = p;
	return rans_checked(out, nbytes, src, srclen, state, t, j, used);
}

#undef G

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#elif defined(__aarch64__)

#include <arm_neon.h>

// neon_expand[m] places the next bytes of the stream in the lanes of the
// 8-lane mask m, in order (index 0xff: no byte, vtbl gives 0). It is
// filled once at load time and only read afterwards.
static uint8_t neon_expand[256][8];

__attribute__((constructor)) static void neon_expand_init(void) {
	for (int m = 0; m < 256; m++) {
		int k = 0;
		for (int l = 0; l < 8; l++)
			neon_expand[m][l] = (m >> l & 1) ? (uint8_t)k++ : 0xff;
	}
}

typedef struct {
	uint8x16x4_t sym0, sym1;
	uint8x16_t freq, start;
} neon_tab;

// neon_renorm shifts a byte into each of the 8 lanes of v below LOW.
static inline uint16x8_t neon_renorm(uint16x8_t v, const uint8_t *src, long *p) {
	static const uint16_t bit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
	uint16x8_t need = vcltq_u16(v, vdupq_n_u16(LOW));
	unsigned m = vaddvq_u16(vandq_u16(need, vld1q_u16(bit)));
	uint16x8_t w = vmovl_u8(vtbl1_u8(vld1_u8(src + *p), vld1_u8(neon_expand[m])));
	*p += __builtin_popcount(m);
	return vbslq_u16(need, vorrq_u16(vshlq_n_u16(v, 8), w), v);
}

// neon16 decodes 16 lanes (states at x) and returns their 8 bytes.
static inline uint8x8_t neon16(uint16_t *x, const uint8_t *src, long *p, const neon_tab *T) {
	uint16x8_t x0 = vld1q_u16(x), x1 = vld1q_u16(x + 8);
	uint8x16_t slot = vandq_u8(vuzp1q_u8(vreinterpretq_u8_u16(x0), vreinterpretq_u8_u16(x1)), vdupq_n_u8(MASK));
	uint8x16_t s = vqtbx4q_u8(vqtbl4q_u8(T->sym0, slot), T->sym1, vsubq_u8(slot, vdupq_n_u8(64)));
	uint8x16_t f = vqtbl1q_u8(T->freq, s);
	uint8x16_t b = vsubq_u8(slot, vqtbl1q_u8(T->start, s));
	uint16x8_t v0 = vmlaq_u16(vmovl_u8(vget_low_u8(b)), vmovl_u8(vget_low_u8(f)), vshrq_n_u16(x0, 7));
	uint16x8_t v1 = vmlaq_u16(vmovl_high_u8(b), vmovl_high_u8(f), vshrq_n_u16(x1, 7));
	vst1q_u16(x, neon_renorm(v0, src, p));
	vst1q_u16(x + 8, neon_renorm(v1, src, p));
	return vsli_n_u8(vget_low_u8(vuzp1q_u8(s, s)), vget_low_u8(vuzp2q_u8(s, s)), 4);
}

static long rans_neon(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *x,
		      const spool_rans_table *t, long *used) {
	neon_tab T = {vld1q_u8_x4(t->sym), vld1q_u8_x4(t->sym + 64), vld1q_u8(t->freq), vld1q_u8(t->start)};
	long steps = 2 * nbytes / LANES, k = 0, p = 0;
	// Each 8 lanes read at most 8 bytes: the step's check covers them.
	for (; k < steps && srclen - p >= LANES; k++) {
		uint8_t *o = out + k * (LANES / 2);
		for (int l = 0; l < LANES; l += 16)
			vst1_u8(o + l / 2, neon16(x + l, src, &p, &T));
	}
	*used = p;
	return rans_checked(out, nbytes, src, srclen, x, t, k * LANES, used);
}

#endif

long spool_rans_decode(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *state,
		       const spool_rans_table *t, long *used, int isa) {
#if defined(__x86_64__)
	if (isa == SPOOL_RANS_AVX512)
		return rans_avx512(out, nbytes, src, srclen, state, t, used);
#elif defined(__aarch64__)
	if (isa == SPOOL_RANS_NEON)
		return rans_neon(out, nbytes, src, srclen, state, t, used);
#endif
	(void)isa;
	return rans_scalar(out, nbytes, src, srclen, state, t, used);
}
