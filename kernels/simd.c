//go:build cgo && (amd64 || arm64)

// SIMD kernels: AVX-512 (F, VL, BW, DQ, VBMI) or AVX2+FMA on amd64, chosen
// by the caller after a CPU check, NEON on arm64. The kernels of
// simd_kern.h are written once against a 16-lane float vector v16: one
// __m512, two __m256 or four float32x4_t. Each variant performs the same
// float operations in the same order on every lane, so all give
// bit-identical results.
//
// Canonical order (the determinism contract): each output depends only on
// its own row's weights and its own input vector, through a fixed sequence
// of operations that does not depend on n, on how rows or columns are split
// between threads, or on the tiling:
//   - a dot product accumulates 16-column chunks (lane i holds columns
//     16k+i) with fma, in column order; a partial last chunk is padded with
//     zeros (weights and inputs); int4 sums each group's chunks into p, then
//     acc = fma(p, scale, acc); f32 and int8 accumulate straight into acc;
//   - the 16 lanes are summed as a tree: lanes i and i+8, then i and i+4,
//     then i and i+2, then i and i+1 (vector pairs: a+b);
//   - int8 multiplies the sum by the row scale;
//   - int4 matrices whose group size is neither a multiple of 16 nor the
//     whole row use the scalar reference order (i4_ref_dot).
// Weighted sums of rows (VecMat, WeightedSum) are described in simd_kern.h.
// Scalar code is never silently fused into FMAs (fp-contract off; cgo
// rejects the flag, hence the pragmas).

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "simd.h"

#include <stddef.h>
#include <string.h>

#define TILE_BYTES (128 << 10) // weight bytes per row block when n > 1
#define PREFETCH_BYTES 1024    // prefetch distance in each streamed row
#define PREFETCH_LOCALITY 3    // __builtin_prefetch locality: into L1
#define UNROLL _Pragma("GCC unroll 16")

static inline long lmin(long a, long b) { return a < b ? a : b; }

// i4_at is column c of a packed int4 row as the float nib-8.
static inline float i4_at(const uint8_t *row, long c) {
	uint8_t b = row[c >> 1];
	int q = (c & 1) ? (b >> 4) : (b & 15);
	return (float)(q - 8);
}

// i4_pad copies the m < 16 columns at p into an 8-byte chunk whose other
// nibbles are 8 (weight 0), for the zero-padded last chunk of a row.
static inline void i4_pad(uint8_t pad[8], const uint8_t *p, long m) {
	memset(pad, 0x88, 8);
	memcpy(pad, p, (size_t)((m + 1) / 2));
	if (m & 1)
		pad[m / 2] = (uint8_t)((pad[m / 2] & 0x0f) | 0x80);
}

// i4_ref_dots is the scalar reference order (MatVecRef) for int4 matrices
// whose groups do not fall on 16-column chunks.
static void i4_ref_dots(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols,
			long gs, const float *x, long xs, long n, float *y, long ys) {
	for (long b = 0; b < n; b++) {
		const float *xb = x + b * xs;
		for (long r = 0; r < rows; r++) {
			const uint8_t *row = w + r * rb;
			float acc = 0;
			long gi = 0;
			for (long g0 = 0; g0 < cols; g0 += gs, gi++) {
				long g1 = lmin(g0 + gs, cols);
				float part = 0;
				for (long c = g0; c < g1; c++)
					part += i4_at(row, c) * xb[c];
				acc += part * sc[r * sp + gi];
			}
			y[b * ys + r] = acc;
		}
	}
}

static inline int i4_vector(long gs, long cols) { return gs % 16 == 0 || gs >= cols; }

#if defined(__x86_64__)

#if defined(__clang__)
#define TARGET_AVX2 _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define TARGET_AVX512                                                                                    \
	_Pragma("clang attribute push(__attribute__((target(\"avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512vbmi\"))), apply_to = function)")
#define TARGET_POP _Pragma("clang attribute pop")
#else
#define TARGET_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define TARGET_AVX512 \
	_Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512vbmi\")")
#define TARGET_POP _Pragma("GCC pop_options")
#endif

#include <immintrin.h>

// ---- AVX2 + FMA: v16 is two __m256 (lanes 0-7, 8-15) -------------------

TARGET_AVX2

typedef struct {
	__m256 a, b;
} v16;

static inline v16 v16_avx2(__m256 a, __m256 b) {
	v16 v = {a, b};
	return v;
}
#define V_ZERO() v16_avx2(_mm256_setzero_ps(), _mm256_setzero_ps())
#define V_LOAD(p) v16_avx2(_mm256_loadu_ps(p), _mm256_loadu_ps((p) + 8))
#define V_STORE(p, v) (_mm256_storeu_ps((p), (v).a), _mm256_storeu_ps((p) + 8, (v).b))
#define V_BCAST(s) v16_avx2(_mm256_set1_ps(s), _mm256_set1_ps(s))
static inline v16 v_fma_avx2(v16 a, v16 b, v16 c) {
	return v16_avx2(_mm256_fmadd_ps(a.a, b.a, c.a), _mm256_fmadd_ps(a.b, b.b, c.b));
}
static inline v16 v_add_avx2(v16 a, v16 b) {
	return v16_avx2(_mm256_add_ps(a.a, b.a), _mm256_add_ps(a.b, b.b));
}
#define V_FMA(a, b, c) v_fma_avx2((a), (b), (c))
#define V_ADD(a, b) v_add_avx2((a), (b))
static inline v16 v_loadn_avx2(const float *p, long m) {
	float buf[16] = {0};
	memcpy(buf, p, sizeof(float) * (size_t)m);
	return V_LOAD(buf);
}
#define V_LOADN(p, m) v_loadn_avx2((p), (m))
static inline v16 v_i8_avx2(const int8_t *p) {
	__m256i lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
	__m256i hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p + 8)));
	return v16_avx2(_mm256_cvtepi32_ps(lo), _mm256_cvtepi32_ps(hi));
}
#define V_I8(p) v_i8_avx2(p)
// int4: broadcast each 4-byte half, flip bit 3 of every nibble (so that the
// signed nibble is nib-8), move nibble i of lane i to the top, shift it down
// arithmetically, convert.
#define V_I4_SETUP                                                                  \
	const __m256i i4sh __attribute__((unused)) = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0); \
	const __m256i i4x __attribute__((unused)) = _mm256_set1_epi32((int)0x88888888);       \
	const __m256i i4sha __attribute__((unused)) = _mm256_setr_epi32(28, 28, 24, 24, 20, 20, 16, 16); \
	const __m256i i4shb __attribute__((unused)) = _mm256_setr_epi32(12, 12, 8, 8, 4, 4, 0, 0)
static inline __m256 i4_half_avx2(const uint8_t *p, __m256i sh, __m256i flip) {
	int32_t u;
	memcpy(&u, p, 4);
	__m256i r = _mm256_xor_si256(_mm256_set1_epi32(u), flip);
	return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sllv_epi32(r, sh), 28));
}
#define V_I4(p) v16_avx2(i4_half_avx2((p), i4sh, i4x), i4_half_avx2((p) + 4, i4sh, i4x))
// V_I4X decodes into the int4 dot lane order (lane 2k: column k, lane
// 2k+1: column 8+k): with the 8 bytes in every quadword, even lanes see
// columns 0-7 and odd lanes columns 8-15.
static inline v16 i4x_avx2(const uint8_t *p, __m256i sha, __m256i shb, __m256i flip) {
	long long u;
	memcpy(&u, p, 8);
	__m256i r = _mm256_xor_si256(_mm256_set1_epi64x(u), flip);
	return v16_avx2(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sllv_epi32(r, sha), 28)),
			_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sllv_epi32(r, shb), 28)));
}
#define V_I4X(p) i4x_avx2((p), i4sha, i4shb, i4x)
static inline v16 v_loadx_avx2(const float *p) {
	__m256 x0 = _mm256_loadu_ps(p), x1 = _mm256_loadu_ps(p + 8);
	__m256 lo = _mm256_unpacklo_ps(x0, x1), hi = _mm256_unpackhi_ps(x0, x1);
	return v16_avx2(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}
#define V_LOADX(p) v_loadx_avx2(p)
static inline v16 v_loadxn_avx2(const float *p, long m) {
	float buf[16] = {0};
	memcpy(buf, p, sizeof(float) * (size_t)m);
	return v_loadx_avx2(buf);
}
#define V_LOADXN(p, m) v_loadxn_avx2((p), (m))
// hsum16 is the lane tree: h8 = lanes 0-7 + 8-15, h4 = its halves, then
// [h4_0+h4_2, h4_1+h4_3], then the two.
static inline float hsum16_avx2(v16 v) {
	__m256 h8 = _mm256_add_ps(v.a, v.b);
	__m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
	__m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
	return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
#define V_REDUCE(acc, cnt, out)                           \
	do {                                              \
		for (int i_ = 0; i_ < (cnt); i_++)        \
			(out)[i_] = hsum16_avx2((acc)[i_]); \
	} while (0)
// V_REDUCE_STORE sets y[i] to the sum of acc[i] (times sc[i] with scales)
// for i < m.
#define V_REDUCE_STORE(acc, cnt, y, m, sc)                                      \
	do {                                                                    \
		for (int i_ = 0; i_ < (m); i_++) {                              \
			float s_ = hsum16_avx2((acc)[i_]);                       \
			(y)[i_] = (sc) ? s_ * (sc)[i_] : s_;                    \
		}                                                               \
	} while (0)
#define DENSE_PAIRS 4
#define I4_PAIRS 4
#define WSUM_NV 2

#define K(name) name##_avx2
#include "simd_kern.h"
#undef K

#undef V_ZERO
#undef V_LOAD
#undef V_STORE
#undef V_BCAST
#undef V_FMA
#undef V_ADD
#undef V_LOADN
#undef V_I8
#undef V_I4_SETUP
#undef V_I4
#undef V_I4X
#undef V_LOADX
#undef V_LOADXN
#undef V_REDUCE
#undef V_REDUCE_STORE
#undef DENSE_PAIRS
#undef I4_PAIRS
#undef WSUM_NV

// spool_read_sum is AVX2 on every amd64 CPU the kernels run on.
uint64_t spool_read_sum(const uint8_t *p, long n) {
	__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
	for (long i = 0; i + 128 <= n; i += 128) {
		s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
		s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
		s2 = _mm256_add_epi64(s2, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
		s3 = _mm256_add_epi64(s3, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
	}
	__m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
	return (uint64_t)_mm256_extract_epi64(s, 0) + (uint64_t)_mm256_extract_epi64(s, 1) +
	       (uint64_t)_mm256_extract_epi64(s, 2) + (uint64_t)_mm256_extract_epi64(s, 3);
}

TARGET_POP

// ---- AVX-512: v16 is one __m512 -----------------------------------------

TARGET_AVX512

typedef __m512 v16z;
#define v16 v16z
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_BCAST(s) _mm512_set1_ps(s)
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_LOADN(p, m) _mm512_maskz_loadu_ps((__mmask16)((1u << (m)) - 1), (p))
#define V_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
// int4: broadcast the 8 bytes (16 nibbles) to every quadword; vpmultishiftqb
// moves nibble i to the low bits of lane i (control byte 4i), and vpermps,
// which reads only the low 4 index bits, maps it to the float nib-8.
#define V_I4_SETUP                                                                      \
	const __m512i i4ctl __attribute__((unused)) = _mm512_setr_epi32(                \
		0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);            \
	const __m512 i4tab __attribute__((unused)) = _mm512_setr_ps(                    \
		-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);                 \
	const __m512i i4shx __attribute__((unused)) = _mm512_setr_epi32(                \
		0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);               \
	const __m512i i4ilv __attribute__((unused)) = _mm512_setr_epi32(                \
		0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)
static inline __m512 i4_avx512(const uint8_t *p, __m512i ctl, __m512 tab) {
	long long u;
	memcpy(&u, p, 8);
	return _mm512_permutexvar_ps(_mm512_multishift_epi64_epi8(ctl, _mm512_set1_epi64(u)), tab);
}
#define V_I4(p) i4_avx512((p), i4ctl, i4tab)
// V_I4X: the dot lane order (lane 2k: column k, lane 2k+1: column 8+k) needs
// only a variable shift of the broadcast: even lanes hold bytes 0-3, odd
// lanes bytes 4-7. V_LOADX puts an input chunk in the same order.
static inline __m512 i4x_avx512(const uint8_t *p, __m512i sh, __m512 tab) {
	long long u;
	memcpy(&u, p, 8);
	return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_set1_epi64(u), sh), tab);
}
#define V_I4X(p) i4x_avx512((p), i4shx, i4tab)
#define V_LOADX(p) _mm512_permutexvar_ps(i4ilv, _mm512_loadu_ps(p))
#define V_LOADXN(p, m) _mm512_permutexvar_ps(i4ilv, V_LOADN(p, m))
// reduce16_avx512 sums each of 16 vectors with the lane tree of
// hsum16_avx2, four tree levels over all vectors at once; out[j] is the sum
// of v[j].
static inline __m512 reduce16v_avx512(const __m512 *v) {
	__m512 t[8], u[4], z[2];
	for (int j = 0; j < 8; j++)
		t[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x44),
				     _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xee));
	for (int k = 0; k < 4; k++)
		u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0x88),
				     _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0xdd));
	for (int m = 0; m < 2; m++)
		z[m] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * m], u[2 * m + 1], 0x44),
				     _mm512_shuffle_ps(u[2 * m], u[2 * m + 1], 0xee));
	__m512 s = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xdd));
	// Lane 4q+k holds the sum of vector q+4k.
	const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_ps(idx, s);
}
static inline void reduce16_avx512(const __m512 *v, float *out) { _mm512_storeu_ps(out, reduce16v_avx512(v)); }
static inline float hsum16_avx512(__m512 v) {
	__m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
	__m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
	__m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
	return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
#define V_REDUCE(acc, cnt, out)                                    \
	do {                                                       \
		if ((cnt) <= 2) {                                  \
			for (int i_ = 0; i_ < (cnt); i_++)         \
				(out)[i_] = hsum16_avx512((acc)[i_]); \
		} else {                                           \
			reduce16_avx512((acc), (out));             \
		}                                                  \
	} while (0)
// V_REDUCE_STORE sets y[i] to the sum of acc[i] (times sc[i] with scales)
// for i < m, with masked vector loads and stores when cnt > 2.
static inline void reduce_store_avx512(const __m512 *v, float *y, int m, const float *sc) {
	__mmask16 k = (__mmask16)((1u << m) - 1);
	__m512 s = reduce16v_avx512(v);
	if (sc)
		s = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, sc));
	_mm512_mask_storeu_ps(y, k, s);
}
#define V_REDUCE_STORE(acc, cnt, y, m, sc)                                      \
	do {                                                                    \
		if ((cnt) <= 2) {                                               \
			for (int i_ = 0; i_ < (m); i_++) {                      \
				float s_ = hsum16_avx512((acc)[i_]);            \
				(y)[i_] = (sc) ? s_ * (sc)[i_] : s_;            \
			}                                                       \
		} else {                                                        \
			reduce_store_avx512((acc), (y), (m), (sc));             \
		}                                                               \
	} while (0)
#define DENSE_PAIRS 16
#define I4_PAIRS 8
#define WSUM_NV 8

#define K(name) name##_avx512
#include "simd_kern.h"
#undef K

TARGET_POP

// ---- entry points ---------------------------------------------------------

void spool_f32_dots(const float *w, long ws, long rows, long cols, const float *x, long xs, long n,
		    float *y, long ys, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		f32_dots_avx512(w, ws, rows, cols, x, xs, n, y, ys);
	else
		f32_dots_avx2(w, ws, rows, cols, x, xs, n, y, ys);
}

void spool_i8_dots(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long xs,
		   long n, float *y, long ys, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		i8_dots_avx512(w, sc, rows, cols, x, xs, n, y, ys);
	else
		i8_dots_avx2(w, sc, rows, cols, x, xs, n, y, ys);
}

void spool_i4_dots(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long xs, long n, float *y, long ys, int isa) {
	if (!i4_vector(gs, cols))
		i4_ref_dots(w, rb, sc, sp, rows, cols, gs, x, xs, n, y, ys);
	else if (isa == SPOOL_ISA_AVX512)
		i4_dots_avx512(w, rb, sc, sp, rows, cols, gs, x, xs, n, y, ys);
	else
		i4_dots_avx2(w, rb, sc, sp, rows, cols, gs, x, xs, n, y, ys);
}

void spool_f32_wsum(const float *w, long ws, long rows, const float *x, long xs, long n, long c0, long c1,
		    float *y, long ys, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		for (long b = 0; b < n; b++)
			f32_wsum_avx512(w, ws, rows, x + b * xs, c0, c1, y + b * ys);
	else
		for (long b = 0; b < n; b++)
			f32_wsum_avx2(w, ws, rows, x + b * xs, c0, c1, y + b * ys);
}

void spool_i8_wsum(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long c0,
		   long c1, float *y, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		i8_wsum_avx512(w, sc, rows, cols, x, c0, c1, y);
	else
		i8_wsum_avx2(w, sc, rows, cols, x, c0, c1, y);
}

void spool_i4_wsum(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long c0, long c1, float *y, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		i4_wsum_avx512(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y);
	else
		i4_wsum_avx2(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y);
}

#elif defined(__aarch64__)

// ---- NEON: v16 is four float32x4_t (lanes 0-3, 4-7, 8-11, 12-15) ---------

#include <arm_neon.h>

typedef struct {
	float32x4_t a, b, c, d;
} v16;

static inline v16 v16_neon(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
	v16 v = {a, b, c, d};
	return v;
}
#define V_ZERO() v16_neon(vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0))
#define V_LOAD(p) v16_neon(vld1q_f32(p), vld1q_f32((p) + 4), vld1q_f32((p) + 8), vld1q_f32((p) + 12))
#define V_STORE(p, v) \
	(vst1q_f32((p), (v).a), vst1q_f32((p) + 4, (v).b), vst1q_f32((p) + 8, (v).c), vst1q_f32((p) + 12, (v).d))
#define V_BCAST(s) v16_neon(vdupq_n_f32(s), vdupq_n_f32(s), vdupq_n_f32(s), vdupq_n_f32(s))
static inline v16 v_fma_neon(v16 a, v16 b, v16 c) {
	return v16_neon(vfmaq_f32(c.a, a.a, b.a), vfmaq_f32(c.b, a.b, b.b), vfmaq_f32(c.c, a.c, b.c),
			vfmaq_f32(c.d, a.d, b.d));
}
static inline v16 v_add_neon(v16 a, v16 b) {
	return v16_neon(vaddq_f32(a.a, b.a), vaddq_f32(a.b, b.b), vaddq_f32(a.c, b.c), vaddq_f32(a.d, b.d));
}
#define V_FMA(a, b, c) v_fma_neon((a), (b), (c))
#define V_ADD(a, b) v_add_neon((a), (b))
static inline v16 v_loadn_neon(const float *p, long m) {
	float buf[16] = {0};
	memcpy(buf, p, sizeof(float) * (size_t)m);
	return V_LOAD(buf);
}
#define V_LOADN(p, m) v_loadn_neon((p), (m))
static inline v16 v_s8_neon(int8x8_t lo, int8x8_t hi) {
	int16x8_t l = vmovl_s8(lo), h = vmovl_s8(hi);
	return v16_neon(vcvtq_f32_s32(vmovl_s16(vget_low_s16(l))), vcvtq_f32_s32(vmovl_high_s16(l)),
			vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_high_s16(h)));
}
#define V_I8(p) v_s8_neon(vld1_s8((const int8_t *)(p)), vld1_s8((const int8_t *)(p) + 8))
// int4: flip bit 3 of every nibble (signed nibble = nib-8), split the low
// and high nibbles with arithmetic shifts, interleave them into column
// order, widen, convert.
#define V_I4_SETUP do {} while (0)
static inline v16 v_i4_neon(const uint8_t *p) {
	int8x8_t s = vreinterpret_s8_u8(veor_u8(vld1_u8(p), vdup_n_u8(0x88)));
	int8x8_t lo = vshr_n_s8(vshl_n_s8(s, 4), 4), hi = vshr_n_s8(s, 4);
	int8x8x2_t z = vzip_s8(lo, hi);
	return v_s8_neon(z.val[0], z.val[1]);
}
#define V_I4(p) v_i4_neon(p)
// V_I4X and V_LOADX: the int4 dot lane order (lane 2k: column k, lane 2k+1:
// column 8+k), interleaving the two halves of the chunk.
static inline v16 v_i4x_neon(const uint8_t *p) {
	int8x8_t s = vreinterpret_s8_u8(veor_u8(vld1_u8(p), vdup_n_u8(0x88)));
	int8x8_t lo = vshr_n_s8(vshl_n_s8(s, 4), 4), hi = vshr_n_s8(s, 4);
	int8x8x2_t z = vzip_s8(lo, hi);
	int8x8x2_t h = vzip_s8(z.val[0], z.val[1]);
	return v_s8_neon(h.val[0], h.val[1]);
}
#define V_I4X(p) v_i4x_neon(p)
static inline v16 v_loadx_neon(const float *p) {
	float32x4_t x0 = vld1q_f32(p), x1 = vld1q_f32(p + 4), x2 = vld1q_f32(p + 8), x3 = vld1q_f32(p + 12);
	return v16_neon(vzip1q_f32(x0, x2), vzip2q_f32(x0, x2), vzip1q_f32(x1, x3), vzip2q_f32(x1, x3));
}
#define V_LOADX(p) v_loadx_neon(p)
static inline v16 v_loadxn_neon(const float *p, long m) {
	float buf[16] = {0};
	memcpy(buf, p, sizeof(float) * (size_t)m);
	return v_loadx_neon(buf);
}
#define V_LOADXN(p, m) v_loadxn_neon((p), (m))
static inline float hsum16_neon(v16 v) {
	float32x4_t h4 = vaddq_f32(vaddq_f32(v.a, v.c), vaddq_f32(v.b, v.d));
	float32x2_t h2 = vadd_f32(vget_low_f32(h4), vget_high_f32(h4));
	return vget_lane_f32(h2, 0) + vget_lane_f32(h2, 1);
}
#define V_REDUCE(acc, cnt, out)                           \
	do {                                              \
		for (int i_ = 0; i_ < (cnt); i_++)        \
			(out)[i_] = hsum16_neon((acc)[i_]); \
	} while (0)
// V_REDUCE_STORE sets y[i] to the sum of acc[i] (times sc[i] with scales)
// for i < m.
#define V_REDUCE_STORE(acc, cnt, y, m, sc)                                      \
	do {                                                                    \
		for (int i_ = 0; i_ < (m); i_++) {                              \
			float s_ = hsum16_neon((acc)[i_]);                       \
			(y)[i_] = (sc) ? s_ * (sc)[i_] : s_;                    \
		}                                                               \
	} while (0)
#define DENSE_PAIRS 4
#define I4_PAIRS 4
#define WSUM_NV 2

#define K(name) name##_neon
#include "simd_kern.h"
#undef K

void spool_f32_dots(const float *w, long ws, long rows, long cols, const float *x, long xs, long n,
		    float *y, long ys, int isa) {
	(void)isa;
	f32_dots_neon(w, ws, rows, cols, x, xs, n, y, ys);
}

void spool_i8_dots(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long xs,
		   long n, float *y, long ys, int isa) {
	(void)isa;
	i8_dots_neon(w, sc, rows, cols, x, xs, n, y, ys);
}

void spool_i4_dots(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long xs, long n, float *y, long ys, int isa) {
	(void)isa;
	if (!i4_vector(gs, cols))
		i4_ref_dots(w, rb, sc, sp, rows, cols, gs, x, xs, n, y, ys);
	else
		i4_dots_neon(w, rb, sc, sp, rows, cols, gs, x, xs, n, y, ys);
}

void spool_f32_wsum(const float *w, long ws, long rows, const float *x, long xs, long n, long c0, long c1,
		    float *y, long ys, int isa) {
	(void)isa;
	for (long b = 0; b < n; b++)
			f32_wsum_neon(w, ws, rows, x + b * xs, c0, c1, y + b * ys);
}

void spool_i8_wsum(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long c0,
		   long c1, float *y, int isa) {
	(void)isa;
	i8_wsum_neon(w, sc, rows, cols, x, c0, c1, y);
}

void spool_i4_wsum(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long c0, long c1, float *y, int isa) {
	(void)isa;
	i4_wsum_neon(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y);
}

uint64_t spool_read_sum(const uint8_t *p, long n) {
	uint64x2_t s0 = vdupq_n_u64(0), s1 = s0, s2 = s0, s3 = s0;
	for (long i = 0; i + 64 <= n; i += 64) {
		s0 = vaddq_u64(s0, vreinterpretq_u64_u8(vld1q_u8(p + i)));
		s1 = vaddq_u64(s1, vreinterpretq_u64_u8(vld1q_u8(p + i + 16)));
		s2 = vaddq_u64(s2, vreinterpretq_u64_u8(vld1q_u8(p + i + 32)));
		s3 = vaddq_u64(s3, vreinterpretq_u64_u8(vld1q_u8(p + i + 48)));
	}
	return vaddvq_u64(vaddq_u64(vaddq_u64(s0, s1), vaddq_u64(s2, s3)));
}

#else
#error "kernels: simd.c supports amd64 and arm64 only"
#endif
