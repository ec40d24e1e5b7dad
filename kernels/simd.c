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

// I4_BLOCK accumulates one 64-column block: even nibbles into pa, odd into pb.
#define I4_BLOCK(raw, xb, pa, pb)                                  \
	do {                                                       \
		pa = V8_FMA(R8_NIB(raw, 0), V8_LOAD((xb) + 0), pa);  \
		pb = V8_FMA(R8_NIB(raw, 1), V8_LOAD((xb) + 8), pb);  \
		pa = V8_FMA(R8_NIB(raw, 2), V8_LOAD((xb) + 16), pa); \
		pb = V8_FMA(R8_NIB(raw, 3), V8_LOAD((xb) + 24), pb); \
		pa = V8_FMA(R8_NIB(raw, 4), V8_LOAD((xb) + 32), pa); \
		pb = V8_FMA(R8_NIB(raw, 5), V8_LOAD((xb) + 40), pb); \
		pa = V8_FMA(R8_NIB(raw, 6), V8_LOAD((xb) + 48), pa); \
		pb = V8_FMA(R8_NIB(raw, 7), V8_LOAD((xb) + 56), pb); \
	} while (0)

// i4_rows1 computes R rows (R constant after inlining) for one input vector.
static inline __attribute__((always_inline)) void
i4_rows1(const uint8_t *w, long rb, const float *sc, long sp, long cols, long gs, int vec,
	 const float *x, const float *xp, float *y, long ys, const int R) {
	v8 acc[4];
	float accs[4];
	for (int r = 0; r < R; r++) {
		acc[r] = V8_ZERO();
		accs[r] = 0;
	}
	long gi = 0;
	for (long g0 = 0; g0 < cols; g0 += gs, gi++) {
		long g1 = lmin(g0 + gs, cols);
		long c = g0;
		long nblk = vec ? (g1 - g0) / 64 : 0;
		if (nblk > 0) {
			v8 pa[4], pb[4];
			for (int r = 0; r < R; r++) {
				pa[r] = V8_ZERO();
				pb[r] = V8_ZERO();
			}
			for (long j = 0; j < nblk; j++, c += 64) {
				for (int r = 0; r < R; r++) {
					r8 raw = R8_LOAD(w + r * rb + c / 2);
					I4_BLOCK(raw, xp + c, pa[r], pb[r]);
				}
			}
			for (int r = 0; r < R; r++)
				acc[r] = V8_FMA(V8_ADD(pa[r], pb[r]), V8_BCAST(sc[r * sp + gi]), acc[r]);
		}
		if (c < g1) {
			for (int r = 0; r < R; r++)
				accs[r] += i4_tail(w + r * rb, x, c, g1) * sc[r * sp + gi];
		}
	}
	for (int r = 0; r < R; r++)
		y[r * ys] = v8_hsum(acc[r]) + accs[r];
}

// i4_rown computes one row for inputs [b0, b0+nb), nb <= NB, decoding each
// weight block once for all of them.
static void i4_rown(const uint8_t *row, const float *sc, long cols, long gs, int vec,
		    const float *x, long xs, const float *xp, long ps, long nb, float *y, long ys) {
	v8 acc[NB], pa[NB], pb[NB];
	float accs[NB];
	for (long b = 0; b < nb; b++) {
		acc[b] = V8_ZERO();
		accs[b] = 0;
	}
	long gi = 0;
	for (long g0 = 0; g0 < cols; g0 += gs, gi++) {
		long g1 = lmin(g0 + gs, cols);
		long c = g0;
		long nblk = vec ? (g1 - g0) / 64 : 0;
		if (nblk > 0) {
			for (long b = 0; b < nb; b++) {
				pa[b] = V8_ZERO();
				pb[b] = V8_ZERO();
			}
			for (long j = 0; j < nblk; j++, c += 64) {
				r8 raw = R8_LOAD(row + c / 2);
				v8 w0 = R8_NIB(raw, 0), w1 = R8_NIB(raw, 1), w2 = R8_NIB(raw, 2), w3 = R8_NIB(raw, 3);
				v8 w4 = R8_NIB(raw, 4), w5 = R8_NIB(raw, 5), w6 = R8_NIB(raw, 6), w7 = R8_NIB(raw, 7);
				for (long b = 0; b < nb; b++) {
					const float *xb = xp + b * ps + c;
					v8 a = pa[b], d = pb[b];
					a = V8_FMA(w0, V8_LOAD(xb + 0), a);
					d = V8_FMA(w1, V8_LOAD(xb + 8), d);
					a = V8_FMA(w2, V8_LOAD(xb + 16), a);
					d = V8_FMA(w3, V8_LOAD(xb + 24), d);
					a = V8_FMA(w4, V8_LOAD(xb + 32), a);
					d = V8_FMA(w5, V8_LOAD(xb + 40), d);
					a = V8_FMA(w6, V8_LOAD(xb + 48), a);
					d = V8_FMA(w7, V8_LOAD(xb + 56), d);
					pa[b] = a;
					pb[b] = d;
				}
			}
			v8 s = V8_BCAST(sc[gi]);
			for (long b = 0; b < nb; b++)
				acc[b] = V8_FMA(V8_ADD(pa[b], pb[b]), s, acc[b]);
		}
		if (c < g1) {
			for (long b = 0; b < nb; b++)
				accs[b] += i4_tail(row, x + b * xs, c, g1) * sc[gi];
		}
	}
	for (long b = 0; b < nb; b++)
		y[b * ys] = v8_hsum(acc[b]) + accs[b];
}

void spool_i4_matmul(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs,
		     const float *x, long xs, const float *xp, long ps,
		     long n, float *y, long ys) {
	int vec = (gs % 64 == 0) || gs >= cols;
	if (n == 1) {
		long r = 0;
		for (; r + 4 <= rows; r += 4)
			i4_rows1(w + r * rb, rb, sc + r * sp, sp, cols, gs, vec, x, xp, y + r, 1, 4);
		for (; r < rows; r++)
			i4_rows1(w + r * rb, rb, sc + r * sp, sp, cols, gs, vec, x, xp, y + r, 1, 1);
		return;
	}
	long tile = lmin(rows, TILE_BYTES / rb + 1);
	for (long r0 = 0; r0 < rows; r0 += tile) {
		long r1 = lmin(r0 + tile, rows);
		for (long b0 = 0; b0 < n; b0 += NB) {
			long nb = lmin(NB, n - b0);
			for (long r = r0; r < r1; r++)
				i4_rown(w + r * rb, sc + r * sp, cols, gs, vec, x + b0 * xs, xs,
					xp + b0 * ps, ps, nb, y + b0 * ys + r, ys);
		}
	}
}

void spool_i4_vecmat(const uint8_t *w, long rb, const float *sc, long sp,
		     long rows, long cols, long gs, const float *x,
		     long c0, long c1, float *y, float *yp) {
	int vec = (gs % 64 == 0) || gs >= cols;
	long v1 = vec ? c0 + (lmin(c1, cols / 64 * 64) - c0) / 64 * 64 : c0; // end of SIMD columns
	if (v1 < c0)
		v1 = c0;
	memset(yp, 0, sizeof(float) * (size_t)(v1 - c0));
	for (long i = v1; i < c1; i++)
		y[i] = 0;
	for (long r = 0; r < rows; r++) {
		const uint8_t *row = w + r * rb;
		const float *s = sc + r * sp;
		float xr = x[r];
		for (long c = c0; c < v1; c += 64) {
			v8 cf = V8_BCAST(xr * s[c / gs]);
			r8 raw = R8_LOAD(row + c / 2);
			float *d = yp + (c - c0);
			V8_STORE(d + 0, V8_FMA(cf, R8_NIB(raw, 0), V8_LOAD(d + 0)));
			V8_STORE(d + 8, V8_FMA(cf, R8_NIB(raw, 1), V8_LOAD(d + 8)));
			V8_STORE(d + 16, V8_FMA(cf, R8_NIB(raw, 2), V8_LOAD(d + 16)));
			V8_STORE(d + 24, V8_FMA(cf, R8_NIB(raw, 3), V8_LOAD(d + 24)));
			V8_STORE(d + 32, V8_FMA(cf, R8_NIB(raw, 4), V8_LOAD(d + 32)));
			V8_STORE(d + 40, V8_FMA(cf, R8_NIB(raw, 5), V8_LOAD(d + 40)));
			V8_STORE(d + 48, V8_FMA(cf, R8_NIB(raw, 6), V8_LOAD(d + 48)));
			V8_STORE(d + 56, V8_FMA(cf, R8_NIB(raw, 7), V8_LOAD(d + 56)));
		}
		for (long i = v1; i < c1; i++) {
			uint8_t b = row[i >> 1];
			int q = (i & 1) ? (b >> 4) : (b & 15);
			y[i] += (xr * s[i / gs]) * (float)(q - 8);
		}
	}
	for (long c = c0; c < v1; c += 64) {
		const float *d = yp + (c - c0);
		for (int l = 0; l < 8; l++)
			for (int k = 0; k < 8; k++)
				y[c + 8 * l + k] = d[k * 8 + l];
	}
}

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
