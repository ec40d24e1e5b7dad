//go:build cgo && (amd64 || arm64)

// Decode loops of the interleaved rANS coder over nibbles (rans.go has the
// format and the Go reference): 256 lanes of 16-bit states, 7-bit
// probabilities, one renormalization byte at most per decode, read in lane
// order. Each loop runs whole steps without bounds checks only while
// enough bytes remain for a step's loads (a step reads at most one byte
// per lane), then finishes in rans_checked, which stops where the bytes
// run out.

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
#pragma clang attribute push(__attribute__((target("avx2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,popcnt")
#endif

#include <immintrin.h>

// avx2_expand[m] places the next bytes of the stream in the 16-bit lanes of
// the 8-lane mask m, in order, with vpshufb (index 0x80: zero). It is filled
// once at load time and only read afterwards.
static uint8_t avx2_expand[256][16];

__attribute__((constructor)) static void avx2_expand_init(void) {
	for (int m = 0; m < 256; m++) {
		int k = 0;
		for (int l = 0; l < 8; l++) {
			avx2_expand[m][2 * l] = (m >> l & 1) ? (uint8_t)k++ : 0x80;
			avx2_expand[m][2 * l + 1] = 0x80;
		}
	}
}

typedef struct {
	// sym[k] is slots 16k..16k+15's symbols XOR those of slots
	// 16(k-1)..16k-1 (sym[0]: slots 0-15), in both 128-bit lanes: the XOR
	// of the vpshufb lookups of every k with 16k <= slot telescopes to the
	// slot's symbol, and slot - 16k < 0 (bit 7 set) looks up zero.
	__m256i sym[8];
	__m256i freq, start; // by symbol, in both 128-bit lanes
} avx2_tab;

// avx2_pair decodes lanes 32i..32i+31 (states at x[0], x[1]: 16 lanes
// each) reading the stream at src + *p, and returns their nibbles as the
// 16 words s(2j) | s(2j+1) << 4, in the order [lanes 0-7, 16-23 | 8-15,
// 24-31] (vpackuswb's). It loads 16 bytes where it needs at most 8.
static inline __attribute__((always_inline)) __m256i avx2_pair(__m256i *x, const uint8_t *src, long *p,
								const avx2_tab *T) {
	const __m256i z = _mm256_setzero_si256();
	__m256i a = x[0], b = x[1];
	__m256i slot = _mm256_packus_epi16(_mm256_and_si256(a, _mm256_set1_epi16((short)MASK)),
					   _mm256_and_si256(b, _mm256_set1_epi16((short)MASK)));
	__m256i s = _mm256_shuffle_epi8(T->sym[0], slot), i = slot;
#pragma GCC unroll 8
	for (int k = 1; k < 8; k++) {
		i = _mm256_sub_epi8(i, _mm256_set1_epi8(16));
		s = _mm256_xor_si256(s, _mm256_shuffle_epi8(T->sym[k], i));
	}
	__m256i f = _mm256_shuffle_epi8(T->freq, s);
	__m256i c = _mm256_sub_epi8(slot, _mm256_shuffle_epi8(T->start, s));
	__m256i va = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpacklo_epi8(f, z), _mm256_srli_epi16(a, 7)),
				      _mm256_unpacklo_epi8(c, z));
	__m256i vb = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpackhi_epi8(f, z), _mm256_srli_epi16(b, 7)),
				      _mm256_unpackhi_epi8(c, z));
	__m256i na = _mm256_cmpeq_epi16(_mm256_srli_epi16(va, 8), z);
	__m256i nb = _mm256_cmpeq_epi16(_mm256_srli_epi16(vb, 8), z);
	// Bits 0-7: lanes 0-7, 8-15: lanes 16-23, 16-23: lanes 8-15, 24-31:
	// lanes 24-31.
	unsigned m = (unsigned)_mm256_movemask_epi8(_mm256_packs_epi16(na, nb));
	unsigned m0 = m & 255, m1 = m >> 16 & 255, m2 = m >> 8 & 255, m3 = m >> 24;
	long p0 = *p, p1 = p0 + _mm_popcnt_u32(m0), p2 = p1 + _mm_popcnt_u32(m1), p3 = p2 + _mm_popcnt_u32(m2);
	*p = p3 + _mm_popcnt_u32(m3);
	__m256i wa = _mm256_shuffle_epi8(_mm256_loadu2_m128i((const __m128i *)(const void *)(src + p1), (const __m128i *)(const void *)(src + p0)),
					 _mm256_loadu2_m128i((const __m128i *)(const void *)avx2_expand[m1], (const __m128i *)(const void *)avx2_expand[m0]));
	__m256i wb = _mm256_shuffle_epi8(_mm256_loadu2_m128i((const __m128i *)(const void *)(src + p3), (const __m128i *)(const void *)(src + p2)),
					 _mm256_loadu2_m128i((const __m128i *)(const void *)avx2_expand[m3], (const __m128i *)(const void *)avx2_expand[m2]));
	x[0] = _mm256_blendv_epi8(va, _mm256_or_si256(_mm256_slli_epi16(va, 8), wa), na);
	x[1] = _mm256_blendv_epi8(vb, _mm256_or_si256(_mm256_slli_epi16(vb, 8), wb), nb);
	return _mm256_maddubs_epi16(s, _mm256_set1_epi16(1 | 16 << 8));
}

// avx2_step decodes one step (LANES nibbles, 128 bytes at o) reading at
// most LANES bytes of the stream at src + *p, and loading at most 8 more.
static inline __attribute__((always_inline)) void avx2_step(__m256i *x, uint8_t *o, const uint8_t *src, long *p,
							    const avx2_tab *T) {
	// vpackuswb of two pairs' words gives dwords [0-7, 16-23, 32-39,
	// 48-55 | 8-15, 24-31, 40-47, 56-63] (lanes); this puts them in order.
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#pragma GCC unroll 8
	for (int g = 0; g < LANES / 32; g += 2) {
		__m256i w0 = avx2_pair(x + 2 * g, src, p, T);
		__m256i w1 = avx2_pair(x + 2 * g + 2, src, p, T);
		__m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w0, w1), order);
		_mm256_storeu_si256((__m256i *)(void *)(o + 16 * g), bytes);
	}
}

static long rans_avx2(uint8_t *out, long nbytes, const uint8_t *src, long srclen, uint16_t *state,
		      const spool_rans_table *t, long *used) {
	avx2_tab T;
	uint8_t prev[16] = {0};
	for (int k = 0; k < 8; k++) {
		uint8_t d[16];
		for (int i = 0; i < 16; i++) {
			d[i] = t->sym[16 * k + i] ^ prev[i];
			prev[i] = t->sym[16 * k + i];
		}
		T.sym[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)d));
	}
	T.freq = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)t->freq));
	T.start = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)t->start));
	__m256i x[LANES / 16];
	for (int g = 0; g < LANES / 16; g++)
		x[g] = _mm256_loadu_si256((const __m256i *)(const void *)(state + 16 * g));
	long steps = 2 * nbytes / LANES, k = 0, p = 0;
	// Straight from the stream while a step's loads stay within it.
	for (; k < steps && srclen - p >= LANES + 8; k++)
		avx2_step(x, out + k * (LANES / 2), src, &p, &T);
	// The last whole steps: from a zero-padded copy of the rest of the
	// stream; a step that needs more bytes than remain is undone and left
	// to rans_checked.
	if (k < steps) {
		uint8_t rest[2 * LANES + 16] = {0};
		long n = srclen - p, q = 0;
		memcpy(rest, src + p, (size_t)n);
		for (; k < steps; k++) {
			__m256i before[LANES / 16];
			uint8_t o[LANES / 2];
			long q0 = q;
			memcpy(before, x, sizeof before);
			avx2_step(x, o, rest, &q, &T);
			if (q > n) {
				memcpy(x, before, sizeof before);
				q = q0;
				break;
			}
			memcpy(out + k * (LANES / 2), o, sizeof o);
		}
		p += q;
	}
	for (int g = 0; g < LANES / 16; g++)
		_mm256_storeu_si256((__m256i *)(void *)(state + 16 * g), x[g]);
	*used = p;
	return rans_checked(out, nbytes, src, srclen, state, t, k * LANES, used);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2"))), \
			     apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,bmi2,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2")
#endif

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
	if (isa == SPOOL_RANS_AVX2)
		return rans_avx2(out, nbytes, src, srclen, state, t, used);
#elif defined(__aarch64__)
	if (isa == SPOOL_RANS_NEON)
		return rans_neon(out, nbytes, src, srclen, state, t, used);
#endif
	(void)isa;
	return rans_scalar(out, nbytes, src, srclen, state, t, used);
}
