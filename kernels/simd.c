//go:build cgo && (amd64 || arm64)

// SIMD kernels: AVX2+FMA on amd64 (called only after a runtime CPU check),
// NEON on arm64. Both are written once against an 8-lane float vector "v8"
// (one __m256, or a pair of float32x4_t), so every lane of every kernel
// performs the same operations in the same order on both architectures.
//
// Canonical order (the determinism contract): each output depends only on its
// own row's weights and its own input vector, through a fixed sequence of
// operations that does not depend on n, on how rows are split between
// threads, or on how many rows are interleaved. Scalar code is never
// silently fused into FMAs (fp-contract off; cgo rejects the flag, hence the
// pragmas).

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "simd.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif
#include <immintrin.h>

typedef __m256 v8;
typedef __m256i r8;

#define V8_ZERO() _mm256_setzero_ps()
#define V8_LOAD(p) _mm256_loadu_ps(p)
#define V8_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V8_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V8_ADD(a, b) _mm256_add_ps((a), (b))
#define V8_BCAST(s) _mm256_set1_ps(s)
// R8_LOAD loads 32 bytes (64 nibbles) and flips bit 3 of every nibble, so
// that a nibble read as a signed 4-bit number is nib-8.
#define R8_LOAD(p) \
	_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p)), _mm256_set1_epi8((char)0x88))
// R8_NIB(r, k): nibble k of each 32-bit lane, sign-extended, as float.
#define R8_NIB(r, k) _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32((r), 28 - 4 * (k)), 28))
// V8_I8(p): 8 signed bytes as floats.
#define V8_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))

static inline float v8_hsum(v8 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

#elif defined(__aarch64__)

#include <arm_neon.h>

typedef struct {
	float32x4_t a, b;
} v8;
typedef struct {
	int32x4_t a, b;
} r8;

static inline v8 v8_make(float32x4_t a, float32x4_t b) {
	v8 v = {a, b};
	return v;
}
#define V8_ZERO() v8_make(vdupq_n_f32(0), vdupq_n_f32(0))
#define V8_LOAD(p) v8_make(vld1q_f32(p), vld1q_f32((p) + 4))
#define V8_STORE(p, v) (vst1q_f32((p), (v).a), vst1q_f32((p) + 4, (v).b))
static inline v8 v8_fma(v8 a, v8 b, v8 c) {
	return v8_make(vfmaq_f32(c.a, a.a, b.a), vfmaq_f32(c.b, a.b, b.b));
}
static inline v8 v8_add(v8 a, v8 b) { return v8_make(vaddq_f32(a.a, b.a), vaddq_f32(a.b, b.b)); }
#define V8_FMA(a, b, c) v8_fma((a), (b), (c))
#define V8_ADD(a, b) v8_add((a), (b))
#define V8_BCAST(s) v8_make(vdupq_n_f32(s), vdupq_n_f32(s))
static inline r8 r8_load(const uint8_t *p) {
	uint8x16_t m = vdupq_n_u8(0x88);
	r8 r = {vreinterpretq_s32_u8(veorq_u8(vld1q_u8(p), m)), vreinterpretq_s32_u8(veorq_u8(vld1q_u8(p + 16), m))};
	return r;
}
#define R8_LOAD(p) r8_load((const uint8_t *)(p))
#define R8_NIB(r, k)                                                          \
	v8_make(vcvtq_f32_s32(vshrq_n_s32(vshlq_n_s32((r).a, 28 - 4 * (k)), 28)), \
		vcvtq_f32_s32(vshrq_n_s32(vshlq_n_s32((r).b, 28 - 4 * (k)), 28)))
static inline v8 v8_i8(const void *p) {
	int16x8_t h = vmovl_s8(vld1_s8((const int8_t *)p));
	return v8_make(vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_high_s16(h)));
}
#define V8_I8(p) v8_i8(p)
static inline float v8_hsum(v8 v) { return vaddvq_f32(vaddq_f32(v.a, v.b)); }

#else
#error "kernels: simd.c supports amd64 and arm64 only"
#endif

#define NB 8          // input vectors sharing one decoded weight block
#define TILE_BYTES (128 << 10) // weight bytes per row tile when n > NB

static inline long lmin(long a, long b) { return a < b ? a : b; }

// ---- int4 ----------------------------------------------------------------

void spool_i4_perm(const float *x, long xs, long n, long cols, float *xp, long ps) {
	long nblk = cols / 64;
	for (long b = 0; b < n; b++) {
		for (long j = 0; j < nblk; j++) {
			const float *s = x + b * xs + 64 * j;
			float *d = xp + b * ps + 64 * j;
			for (int l = 0; l < 8; l++)
				for (int k = 0; k < 8; k++)
					d[k * 8 + l] = s[8 * l + k];
		}
	}
}

// i4_tail is the scalar part of a group: columns [c, c1) in column order.
static inline float i4_tail(const uint8_t *row, const float *x, long c, long c1) {
	float p = 0;
	for (long i = c; i < c1; i++) {
		uint8_t b = row[i >> 1];
		int q = (i & 1) ? (b >> 4) : (b & 15);
		p += (float)(q - 8) * x[i];
	}
	return p;
}

#define I4_NB 4 // inputs sharing one decoded int4 block

#if defined(__x86_64__)

// AVX2 decoder: R8_LOAD/R8_NIB above (xor 0x88, shift left, shift right
// arithmetic, convert).
#define I4_FN(name) i4_##name##_avx2
#include "simd_i4.h"
#undef I4_FN

// AVX-512VL decoder: one two-table permute maps the low 4 bits of each lane
// straight to the float nib-8 (vpermt2ps ignores the higher index bits), so
// a nibble costs a shift and a permute instead of two shifts and a convert.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl")
#endif
#undef R8_LOAD
#undef R8_NIB
#define R8_LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define R8_NIB(r, k)                                                                        \
	_mm256_permutex2var_ps(_mm256_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1),             \
			       _mm256_srli_epi32((r), 4 * (k)),                                           \
			       _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7))
#define I4_FN(name) i4_##name##_avx512
#include "simd_i4.h"
#undef I4_FN
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

void spool_i4_matmul(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs,
		     const float *x, long xs, const float *xp, long ps,
		     long n, float *y, long ys, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		i4_matmul_avx512(w, rb, sc, sp, rows, cols, gs, x, xs, xp, ps, n, y, ys);
	else
		i4_matmul_avx2(w, rb, sc, sp, rows, cols, gs, x, xs, xp, ps, n, y, ys);
}

void spool_i4_vecmat(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs, const float *x,
		     long c0, long c1, float *y, float *yp, int isa) {
	if (isa == SPOOL_ISA_AVX512)
		i4_vecmat_avx512(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y, yp);
	else
		i4_vecmat_avx2(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y, yp);
}

#else

#define I4_FN(name) i4_##name##_neon
#include "simd_i4.h"
#undef I4_FN

void spool_i4_matmul(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs,
		     const float *x, long xs, const float *xp, long ps,
		     long n, float *y, long ys, int isa) {
	(void)isa;
	i4_matmul_neon(w, rb, sc, sp, rows, cols, gs, x, xs, xp, ps, n, y, ys);
}

void spool_i4_vecmat(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs, const float *x,
		     long c0, long c1, float *y, float *yp, int isa) {
	(void)isa;
	i4_vecmat_neon(w, rb, sc, sp, rows, cols, gs, x, c0, c1, y, yp);
}

#endif

// ---- int8-row and f32 ----------------------------------------------------
//
// Canonical order: four 8-lane chains over 32-column blocks, combined as
// (c0+c1)+(c2+c3) and summed across lanes; then the remaining columns in
// column order; int8 multiplies the total by the row scale.

#define DENSE_ROWN(NAME, T, LOADW, FINISH)                                                          \
	static void NAME(const T *row, long cols, const float *x, long xs, long nb, float *y, long ys, \
			 float scale) {                                                               \
		v8 a0[NB], a1[NB], a2[NB], a3[NB];                                                  \
		for (long b = 0; b < nb; b++)                                                       \
			a0[b] = a1[b] = a2[b] = a3[b] = V8_ZERO();                                  \
		long c = 0;                                                                         \
		for (; c + 32 <= cols; c += 32) {                                                   \
			v8 w0 = LOADW(row + c), w1 = LOADW(row + c + 8);                            \
			v8 w2 = LOADW(row + c + 16), w3 = LOADW(row + c + 24);                      \
			for (long b = 0; b < nb; b++) {                                             \
				const float *xb = x + b * xs + c;                                   \
				a0[b] = V8_FMA(w0, V8_LOAD(xb), a0[b]);                             \
				a1[b] = V8_FMA(w1, V8_LOAD(xb + 8), a1[b]);                         \
				a2[b] = V8_FMA(w2, V8_LOAD(xb + 16), a2[b]);                        \
				a3[b] = V8_FMA(w3, V8_LOAD(xb + 24), a3[b]);                        \
			}                                                                           \
		}                                                                                   \
		for (long b = 0; b < nb; b++) {                                                     \
			const float *xb = x + b * xs;                                               \
			float s = v8_hsum(V8_ADD(V8_ADD(a0[b], a1[b]), V8_ADD(a2[b], a3[b])));      \
			float t = 0;                                                                \
			for (long i = c; i < cols; i++)                                             \
				t += (float)row[i] * xb[i];                                         \
			y[b * ys] = FINISH(s + t, scale);                                           \
		}                                                                                   \
	}

#define LOADW_I8(p) V8_I8(p)
#define LOADW_F32(p) V8_LOAD(p)
#define FINISH_I8(v, s) ((v) * (s))
#define FINISH_F32(v, s) (v)

DENSE_ROWN(i8_rown, int8_t, LOADW_I8, FINISH_I8)
DENSE_ROWN(f32_rown, float, LOADW_F32, FINISH_F32)

void spool_i8_matmul(const uint8_t *w, const float *sc, long rows, long cols,
		     const float *x, long xs, long n, float *y, long ys) {
	long tile = n > NB ? lmin(rows, TILE_BYTES / cols + 1) : rows;
	for (long r0 = 0; r0 < rows; r0 += tile) {
		long r1 = lmin(r0 + tile, rows);
		for (long b0 = 0; b0 < n; b0 += NB) {
			long nb = lmin(NB, n - b0);
			for (long r = r0; r < r1; r++)
				i8_rown((const int8_t *)w + r * cols, cols, x + b0 * xs, xs, nb,
					y + b0 * ys + r, ys, sc[r]);
		}
	}
}

void spool_f32_matmul(const float *w, long ws, long rows, long cols,
		      const float *x, long xs, long n, float *y, long ys) {
	long tile = n > NB ? lmin(rows, TILE_BYTES / (4 * cols) + 1) : rows;
	for (long r0 = 0; r0 < rows; r0 += tile) {
		long r1 = lmin(r0 + tile, rows);
		for (long b0 = 0; b0 < n; b0 += NB) {
			long nb = lmin(NB, n - b0);
			for (long r = r0; r < r1; r++)
				f32_rown(w + r * ws, cols, x + b0 * xs, xs, nb, y + b0 * ys + r, ys, 1);
		}
	}
}

// VecMat for int8/f32: y[c] = fma(x[r]*scale, w, y[c]) over rows in order,
// SIMD over columns below the last multiple of 8, scalar (mul, add) above it.
void spool_i8_vecmat(const uint8_t *w, const float *sc, long rows, long cols,
		     const float *x, long c0, long c1, float *y) {
	long v1 = lmin(c1, cols / 8 * 8);
	if (v1 < c0)
		v1 = c0;
	for (long i = c0; i < c1; i++)
		y[i] = 0;
	for (long r = 0; r < rows; r++) {
		const int8_t *row = (const int8_t *)w + r * cols;
		float cr = x[r] * sc[r];
		v8 cf = V8_BCAST(cr);
		long c = c0;
		for (; c < v1; c += 8)
			V8_STORE(y + c, V8_FMA(cf, V8_I8(row + c), V8_LOAD(y + c)));
		for (; c < c1; c++)
			y[c] += cr * (float)row[c];
	}
}

void spool_f32_vecmat(const float *w, long ws, long rows, const float *x,
		      long c0, long c1, float *y) {
	long v1 = c0 + (c1 - c0) / 8 * 8;
	for (long i = c0; i < c1; i++)
		y[i] = 0;
	for (long r = 0; r < rows; r++) {
		const float *row = w + r * ws;
		v8 cf = V8_BCAST(x[r]);
		long c = c0;
		for (; c < v1; c += 8)
			V8_STORE(y + c, V8_FMA(cf, V8_LOAD(row + c), V8_LOAD(y + c)));
		for (; c < c1; c++)
			y[c] += x[r] * row[c];
	}
}

// ---- memory bandwidth probe ----------------------------------------------

uint64_t spool_read_sum(const uint8_t *p, long n) {
#if defined(__x86_64__)
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
#else
	uint64x2_t s0 = vdupq_n_u64(0), s1 = s0, s2 = s0, s3 = s0;
	for (long i = 0; i + 64 <= n; i += 64) {
		s0 = vaddq_u64(s0, vreinterpretq_u64_u8(vld1q_u8(p + i)));
		s1 = vaddq_u64(s1, vreinterpretq_u64_u8(vld1q_u8(p + i + 16)));
		s2 = vaddq_u64(s2, vreinterpretq_u64_u8(vld1q_u8(p + i + 32)));
		s3 = vaddq_u64(s3, vreinterpretq_u64_u8(vld1q_u8(p + i + 48)));
	}
	return vaddvq_u64(vaddq_u64(vaddq_u64(s0, s1), vaddq_u64(s2, s3)));
#endif
}

#if defined(__x86_64__) && defined(__clang__)
#pragma clang attribute pop
#endif
