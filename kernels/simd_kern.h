// Kernels of simd.c, included once per instruction set: K(name) names the
// variant, and the including section defines the 16-lane float vector v16
// and its operations (V_*), plus the tile sizes. Every variant performs the
// same float operations on the same values in the same order (the canonical
// order of simd.c); only the vector width, the decoding instructions and the
// tiling differ, so all variants give bit-identical results.

// ---- dot products: f32, int8-row, int4 ---------------------------------
//
// A tile computes the dot products of RT rows with BT inputs at once: the
// input chunk is loaded once for RT rows and each decoded weight chunk is
// used for BT inputs. Tile rows past nr repeat row nr-1 and are not stored.

// Streamed weights (int8, int4) are prefetched PREFETCH_BYTES ahead in each
// row, and int4 group scales as far ahead in the weights: the tile reads RT
// rows (and RT rows of scales) at once, more streams than the hardware
// prefetcher runs far enough ahead on.
//
// DENSE_TILE defines the f32 / int8 tile: one accumulator per (row, input),
// 16-column chunks in column order, the last partial chunk zero-padded,
// then the lane tree sum (times the row scale for int8).
#define DENSE_TILE(NAME, T, LOADW, LOADWN, PF)                                                     \
	static inline __attribute__((always_inline)) void K(NAME)(                          \
		const T *w, long ws, long nr, long cols, const float *sc, const float *x,   \
		long xs, float *y, long ys, const int RT, const int BT) {                   \
		v16 acc[16];                                                                 \
		const T *wr[16];                                                             \
		UNROLL for (int i = 0; i < 16; i++) acc[i] = V_ZERO();                       \
		UNROLL for (int r = 0; r < RT; r++) wr[r] = w + (r < nr ? r : nr - 1) * ws;  \
		long c = 0;                                                                  \
		for (; c + 16 <= cols; c += 16) {                                            \
			v16 xv[16];                                                          \
			if (PF && ((c * (long)sizeof(T)) & 63) == 0)                         \
				UNROLL for (int r = 0; r < RT; r++)                          \
					__builtin_prefetch((const char *)(wr[r] + c) + PREFETCH_BYTES, 0, PREFETCH_LOCALITY); \
			UNROLL for (int b = 0; b < BT; b++) xv[b] = V_LOAD(x + b * xs + c);  \
			UNROLL for (int r = 0; r < RT; r++) {                                \
				v16 wv = LOADW(wr[r] + c);                                   \
				UNROLL for (int b = 0; b < BT; b++)                          \
					acc[r * BT + b] = V_FMA(wv, xv[b], acc[r * BT + b]); \
			}                                                                    \
		}                                                                            \
		if (c < cols) {                                                              \
			long m = cols - c;                                                   \
			v16 xv[16];                                                          \
			UNROLL for (int b = 0; b < BT; b++) xv[b] = V_LOADN(x + b * xs + c, m); \
			UNROLL for (int r = 0; r < RT; r++) {                                \
				v16 wv = LOADWN(wr[r] + c, m);                               \
				UNROLL for (int b = 0; b < BT; b++)                          \
					acc[r * BT + b] = V_FMA(wv, xv[b], acc[r * BT + b]); \
			}                                                                    \
		}                                                                            \
		if (BT == 1) {                                                               \
			V_REDUCE_STORE(acc, RT, y, nr < RT ? nr : RT, sc);                   \
			return;                                                              \
		}                                                                            \
		float out[16];                                                               \
		V_REDUCE(acc, RT * BT, out);                                                 \
		for (int r = 0; r < RT && r < nr; r++)                                       \
			for (int b = 0; b < BT; b++)                                         \
				y[b * ys + r] = sc ? out[r * BT + b] * sc[r] : out[r * BT + b]; \
	}

#define LOADW_F32(p) V_LOAD(p)
#define LOADWN_F32(p, m) V_LOADN(p, m)
#define LOADW_I8(p) V_I8((const int8_t *)(p))
#define LOADWN_I8(p, m) K(i8n)((const int8_t *)(p), m)

static inline __attribute__((always_inline)) v16 K(i8n)(const int8_t *p, long m) {
	int8_t buf[16] = {0};
	memcpy(buf, p, (size_t)m);
	return V_I8(buf);
}

DENSE_TILE(f32_tile, float, LOADW_F32, LOADWN_F32, 0)
DENSE_TILE(i8_tile, int8_t, LOADW_I8, LOADWN_I8, 1)

// i4_tile is the int4 tile. Per (row, input) and group: p = sum of the
// group's 16-column chunks (fma, column order; a partial last chunk is
// zero-padded), then acc = fma(p, scale, acc); the output is the lane tree
// sum of acc. In int4 chunks lane 2k holds column k and lane 2k+1 column
// 8+k (V_I4X, V_LOADX): the order one variable shift of the broadcast bytes
// gives on AVX-512. GS is 64 for the common group size (a constant loop),
// else 0.
static inline __attribute__((always_inline)) void
K(i4_tile)(const uint8_t *w, long rb, const float *sc, long sp, long nr, long cols, long gs,
	   const float *x, long xs, float *y, long ys, const int RT, const int BT, const long GS) {
	V_I4_SETUP;
	v16 acc[16], p[16];
	const uint8_t *wr[16];
	const float *sr[16];
	UNROLL for (int i = 0; i < 16; i++) acc[i] = V_ZERO();
	UNROLL for (int r = 0; r < RT; r++) {
		long rr = r < nr ? r : nr - 1;
		wr[r] = w + rr * rb;
		sr[r] = sc + rr * sp;
	}
	long g = GS ? GS : gs;
	long gi = 0;
	for (long g0 = 0; g0 < cols; g0 += g, gi++) {
		long g1 = g0 + g < cols ? g0 + g : cols;
		UNROLL for (int i = 0; i < RT * BT; i++) p[i] = V_ZERO();
		if ((gi & 15) == 0)
			UNROLL for (int r = 0; r < RT; r++)
				__builtin_prefetch(sr[r] + gi + PREFETCH_BYTES / 32, 0, PREFETCH_LOCALITY);
		long c = g0;
		if (GS && g1 - g0 == GS) {
			if ((gi & 1) == 0)
				UNROLL for (int r = 0; r < RT; r++)
					__builtin_prefetch(wr[r] + g0 / 2 + PREFETCH_BYTES, 0, PREFETCH_LOCALITY);
			UNROLL for (long k = 0; k < GS; k += 16) {
				v16 xv[16];
				UNROLL for (int b = 0; b < BT; b++) xv[b] = V_LOADX(x + b * xs + g0 + k);
				UNROLL for (int r = 0; r < RT; r++) {
					v16 wv = V_I4X(wr[r] + (g0 + k) / 2);
					UNROLL for (int b = 0; b < BT; b++)
						p[r * BT + b] = V_FMA(wv, xv[b], p[r * BT + b]);
				}
			}
			c = g1;
		}
		for (; c + 16 <= g1; c += 16) {
			v16 xv[16];
			if ((c & 127) == 0)
				UNROLL for (int r = 0; r < RT; r++)
					__builtin_prefetch(wr[r] + c / 2 + PREFETCH_BYTES, 0, PREFETCH_LOCALITY);
			UNROLL for (int b = 0; b < BT; b++) xv[b] = V_LOADX(x + b * xs + c);
			UNROLL for (int r = 0; r < RT; r++) {
				v16 wv = V_I4X(wr[r] + c / 2);
				UNROLL for (int b = 0; b < BT; b++)
					p[r * BT + b] = V_FMA(wv, xv[b], p[r * BT + b]);
			}
		}
		if (c < g1) {
			long m = g1 - c;
			v16 xv[16];
			UNROLL for (int b = 0; b < BT; b++) xv[b] = V_LOADXN(x + b * xs + c, m);
			UNROLL for (int r = 0; r < RT; r++) {
				uint8_t pad[8];
				i4_pad(pad, wr[r] + c / 2, m);
				v16 wv = V_I4X(pad);
				UNROLL for (int b = 0; b < BT; b++)
					p[r * BT + b] = V_FMA(wv, xv[b], p[r * BT + b]);
			}
		}
		UNROLL for (int r = 0; r < RT; r++) {
			v16 s = V_BCAST(sr[r][gi]);
			UNROLL for (int b = 0; b < BT; b++)
				acc[r * BT + b] = V_FMA(p[r * BT + b], s, acc[r * BT + b]);
		}
	}
	if (BT == 1) {
		V_REDUCE_STORE(acc, RT, y, nr < RT ? nr : RT, (const float *)NULL);
		return;
	}
	float out[16];
	V_REDUCE(acc, RT * BT, out);
	for (int r = 0; r < RT && r < nr; r++)
		for (int b = 0; b < BT; b++)
			y[b * ys + r] = out[r * BT + b];
}

// DOTS_RUN runs TILE over rows [0, rows) and inputs [0, n): rows in blocks of
// about TILE_BYTES of weights, inputs in tiles of BT (4, 2, 1 as they fit;
// RT = TILE_PAIRS / BT, TILE_PAIRS a multiple of 4), so a block's weights stay in cache while every
// input is applied to them.
#define DOTS_RUN(TILE_CALL, ROWBYTES, TILE_PAIRS)                                                         \
	do {                                                                                  \
		long blk = n > 1 ? lmin(rows, TILE_BYTES / (ROWBYTES) + 1) : rows;            \
		for (long r0 = 0; r0 < rows; r0 += blk) {                                     \
			long r1 = lmin(r0 + blk, rows);                                       \
			for (long b0 = 0; b0 < n;) {                                          \
				long left = n - b0;                                           \
				if (left >= 4) {                                              \
					for (long r = r0; r < r1; r += TILE_PAIRS / 4)        \
						TILE_CALL(r, r1 - r, b0, TILE_PAIRS / 4, 4); \
					b0 += 4;                                              \
				} else if (left >= 2) {                                       \
					for (long r = r0; r < r1; r += TILE_PAIRS / 2)        \
						TILE_CALL(r, r1 - r, b0, TILE_PAIRS / 2, 2); \
					b0 += 2;                                              \
				} else {                                                      \
					for (long r = r0; r < r1; r += TILE_PAIRS)            \
						TILE_CALL(r, r1 - r, b0, TILE_PAIRS, 1);      \
					b0 += 1;                                              \
				}                                                             \
			}                                                                     \
		}                                                                             \
	} while (0)

static void K(f32_dots)(const float *w, long ws, long rows, long cols, const float *x, long xs,
			long n, float *y, long ys) {
#define F32_CALL(r, nr, b0, RT, BT) \
	K(f32_tile)(w + (r) * ws, ws, nr, cols, NULL, x + (b0) * xs, xs, y + (b0) * ys + (r), ys, RT, BT)
	DOTS_RUN(F32_CALL, 4 * cols, DENSE_PAIRS);
#undef F32_CALL
}

static void K(i8_dots)(const uint8_t *w, const float *sc, long rows, long cols, const float *x,
		       long xs, long n, float *y, long ys) {
	const int8_t *w8 = (const int8_t *)w;
#define I8_CALL(r, nr, b0, RT, BT)                                                         \
	K(i8_tile)(w8 + (r) * cols, cols, nr, cols, sc + (r), x + (b0) * xs, xs, y + (b0) * ys + (r), \
		   ys, RT, BT)
	DOTS_RUN(I8_CALL, cols, DENSE_PAIRS);
#undef I8_CALL
}

static void K(i4_dots)(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols,
		       long gs, const float *x, long xs, long n, float *y, long ys) {
	if (gs >= cols)
		gs = cols;
#define I4_CALL(r, nr, b0, RT, BT)                                                             \
	K(i4_tile)(w + (r) * rb, rb, sc + (r) * sp, sp, nr, cols, gs, x + (b0) * xs, xs,       \
		   y + (b0) * ys + (r), ys, RT, BT, GS_)
	if (gs == 64) {
#define GS_ 64
		DOTS_RUN(I4_CALL, rb, I4_PAIRS);
#undef GS_
	} else {
#define GS_ 0
		DOTS_RUN(I4_CALL, rb, I4_PAIRS);
#undef GS_
	}
#undef I4_CALL
}

// ---- weighted sums of rows: VecMat, WeightedSum ------------------------
//
// Canonical order per column c: e = fma(coef_r, w[r,c], e) over even rows r
// in order, o likewise over odd rows, y[c] = e + o. coef_r is x[r] for f32,
// x[r]*scale for int8 and int4 (the scale of c's group). Columns are
// independent, so NV chunks of 16 columns go together and the columns past
// the last chunk are computed one by one with scalar fma, the same
// operations.

// WSUM_BLOCK defines NAME(c, NV): columns [c, c+16*NV) of one format.
// COEF(r, c) is the row coefficient, LOADW(r, c) the 16 weights at (r, c).
#define WSUM_BLOCK(NAME, PARAMS, COEF, LOADW)                                           \
	static inline __attribute__((always_inline)) void K(NAME)(PARAMS, long rows,   \
								  const float *x, long c, float *y, const int NV) { \
		V_I4_SETUP;                                                             \
		v16 e[8], o[8];                                                         \
		UNROLL for (int j = 0; j < NV; j++) e[j] = o[j] = V_ZERO();             \
		long r = 0;                                                             \
		for (; r + 2 <= rows; r += 2) {                                         \
			UNROLL for (int j = 0; j < NV; j++) {                           \
				long cj = c + 16 * j;                                   \
				e[j] = V_FMA(V_BCAST(COEF(r, cj)), LOADW(r, cj), e[j]); \
				o[j] = V_FMA(V_BCAST(COEF(r + 1, cj)), LOADW(r + 1, cj), o[j]); \
			}                                                               \
		}                                                                       \
		if (r < rows) {                                                         \
			UNROLL for (int j = 0; j < NV; j++) {                           \
				long cj = c + 16 * j;                                   \
				e[j] = V_FMA(V_BCAST(COEF(r, cj)), LOADW(r, cj), e[j]); \
			}                                                               \
		}                                                                       \
		UNROLL for (int j = 0; j < NV; j++) V_STORE(y + c + 16 * j, V_ADD(e[j], o[j])); \
	}

#define WSUM_RUN(BLOCK, ...)                                              \
	do {                                                              \
		long c = c0;                                              \
		for (; c + 16 * WSUM_NV <= v1; c += 16 * WSUM_NV)         \
			K(BLOCK)(__VA_ARGS__, rows, x, c, y, WSUM_NV);    \
		if (WSUM_NV > 4 && c + 64 <= v1) {                        \
			K(BLOCK)(__VA_ARGS__, rows, x, c, y, 4);          \
			c += 64;                                          \
		}                                                         \
		if (WSUM_NV > 2 && c + 32 <= v1) {                        \
			K(BLOCK)(__VA_ARGS__, rows, x, c, y, 2);          \
			c += 32;                                          \
		}                                                         \
		for (; c + 16 <= v1; c += 16)                             \
			K(BLOCK)(__VA_ARGS__, rows, x, c, y, 1);          \
	} while (0)

#define F32_PARAMS const float *w, long ws
#define F32_COEF(r, c) x[r]
#define F32_LOADW(r, c) V_LOAD(w + (r) * ws + (c))
WSUM_BLOCK(f32_wsum_blk, F32_PARAMS, F32_COEF, F32_LOADW)

#define I8_PARAMS const int8_t *w, const float *sc, long cols
#define I8_COEF(r, c) (x[r] * sc[r])
#define I8_LOADW(r, c) V_I8(w + (r) * cols + (c))
WSUM_BLOCK(i8_wsum_blk, I8_PARAMS, I8_COEF, I8_LOADW)

#define I4_PARAMS const uint8_t *w, long rb, const float *sc, long sp, long gs
#define I4_COEF(r, c) (x[r] * sc[(r) * sp + (c) / gs])
#define I4_LOADW(r, c) V_I4(w + (r) * rb + (c) / 2)
WSUM_BLOCK(i4_wsum_blk, I4_PARAMS, I4_COEF, I4_LOADW)

// The scalar columns: the same fma chains, one lane at a time.
#define WSUM_COL(COEF, WVAL)                                        \
	for (long c = v1; c < c1; c++) {                            \
		float e = 0, o = 0;                                 \
		long r = 0;                                         \
		for (; r + 2 <= rows; r += 2) {                     \
			e = __builtin_fmaf(COEF(r, c), WVAL(r, c), e);     \
			o = __builtin_fmaf(COEF(r + 1, c), WVAL(r + 1, c), o); \
		}                                                   \
		if (r < rows)                                       \
			e = __builtin_fmaf(COEF(r, c), WVAL(r, c), e);     \
		y[c] = e + o;                                       \
	}

#define F32_WVAL(r, c) w[(r) * ws + (c)]
#define I8_WVAL(r, c) ((float)w[(r) * cols + (c)])
#define I4_WVAL(r, c) i4_at(w + (r) * rb, c)

static void K(f32_wsum)(const float *w, long ws, long rows, const float *x, long c0, long c1,
			float *y) {
	long v1 = c0 + (c1 - c0) / 16 * 16;
	WSUM_RUN(f32_wsum_blk, w, ws);
	WSUM_COL(F32_COEF, F32_WVAL)
}

static void K(i8_wsum)(const uint8_t *w8, const float *sc, long rows, long cols, const float *x,
		       long c0, long c1, float *y) {
	const int8_t *w = (const int8_t *)w8;
	long v1 = c0 + (c1 - c0) / 16 * 16;
	WSUM_RUN(i8_wsum_blk, w, sc, cols);
	WSUM_COL(I8_COEF, I8_WVAL)
}

static void K(i4_wsum)(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols,
		       long gs, const float *x, long c0, long c1, float *y) {
	if (gs >= cols)
		gs = cols;
	// Chunks of 16 columns need one scale each: gs a multiple of 16, or
	// one group per row.
	long v1 = c0;
	if (gs % 16 == 0 || gs == cols)
		v1 = c0 + (c1 - c0) / 16 * 16;
	WSUM_RUN(i4_wsum_blk, w, rb, sc, sp, gs);
	WSUM_COL(I4_COEF, I4_WVAL)
}

#undef F32_PARAMS
#undef F32_COEF
#undef F32_LOADW
#undef I8_PARAMS
#undef I8_COEF
#undef I8_LOADW
#undef I4_PARAMS
#undef I4_COEF
#undef I4_LOADW
#undef F32_WVAL
#undef I8_WVAL
#undef I4_WVAL
#undef WSUM_BLOCK
#undef WSUM_RUN
#undef WSUM_COL
#undef DENSE_TILE
#undef DOTS_RUN
#undef LOADW_F32
#undef LOADWN_F32
#undef LOADW_I8
#undef LOADWN_I8
