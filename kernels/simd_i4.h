// int4 kernels, included by simd.c once per decoder: I4_FN(name) names the
// variant, R8_LOAD/R8_NIB decode 32 bytes into eight v8 vectors of nib-8.
// Every variant performs the same float operations in the same order, so
// they give bit-identical results; only the integer decoding differs.
//
// Block layout: a 64-column block is 8 lanes of 4 bytes; lane l holds
// columns 8l..8l+7, nibble k of the lane is column 8l+k. xp (from
// spool_i4_perm) stores the block's inputs as xp[k*8+l], so vector k of the
// block multiplies nibble k of every lane.
//
// Canonical order per (row, input): for each group, full blocks accumulate
// even nibbles into pa and odd into pb (per lane, block after block); then
// acc = fma(pa+pb, scale, acc). Columns of the group past its last full
// block are summed in column order (i4_tail) into a scalar accs += part *
// scale. The output is hsum(acc) + accs.

// rows1 computes R consecutive rows (R constant after inlining) for one
// input vector.
static inline __attribute__((always_inline)) void
I4_FN(rows1)(const uint8_t *w, long rb, const float *sc, long sp, long cols, long gs, int vec,
	     const float *x, const float *xp, float *y, const int R) {
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
				const float *xb = xp + c;
				for (int r = 0; r < R; r++) {
					r8 raw = R8_LOAD(w + r * rb + c / 2);
					pa[r] = V8_FMA(R8_NIB(raw, 0), V8_LOAD(xb + 0), pa[r]);
					pb[r] = V8_FMA(R8_NIB(raw, 1), V8_LOAD(xb + 8), pb[r]);
					pa[r] = V8_FMA(R8_NIB(raw, 2), V8_LOAD(xb + 16), pa[r]);
					pb[r] = V8_FMA(R8_NIB(raw, 3), V8_LOAD(xb + 24), pb[r]);
					pa[r] = V8_FMA(R8_NIB(raw, 4), V8_LOAD(xb + 32), pa[r]);
					pb[r] = V8_FMA(R8_NIB(raw, 5), V8_LOAD(xb + 40), pb[r]);
					pa[r] = V8_FMA(R8_NIB(raw, 6), V8_LOAD(xb + 48), pa[r]);
					pb[r] = V8_FMA(R8_NIB(raw, 7), V8_LOAD(xb + 56), pb[r]);
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
		y[r] = v8_hsum(acc[r]) + accs[r];
}

// I4_NIBN applies decoded nibble k of a block to all NBc inputs.
#define I4_NIBN(k, p)                                                        \
	do {                                                                 \
		v8 wk = R8_NIB(raw, k);                                      \
		for (int b = 0; b < NBc; b++)                                \
			p[b] = V8_FMA(wk, V8_LOAD(xp + b * ps + c + 8 * (k)), p[b]); \
	} while (0)

// rowsn computes one row for NBc inputs (constant after inlining), decoding
// each block once for all of them.
static inline __attribute__((always_inline)) void
I4_FN(rowsn)(const uint8_t *row, const float *sc, long cols, long gs, int vec,
	     const float *x, long xs, const float *xp, long ps, float *y, long ys, const int NBc) {
	v8 acc[I4_NB], pa[I4_NB], pb[I4_NB];
	float accs[I4_NB];
	for (int b = 0; b < NBc; b++) {
		acc[b] = V8_ZERO();
		accs[b] = 0;
	}
	long gi = 0;
	for (long g0 = 0; g0 < cols; g0 += gs, gi++) {
		long g1 = lmin(g0 + gs, cols);
		long c = g0;
		long nblk = vec ? (g1 - g0) / 64 : 0;
		if (nblk > 0) {
			for (int b = 0; b < NBc; b++) {
				pa[b] = V8_ZERO();
				pb[b] = V8_ZERO();
			}
			for (long j = 0; j < nblk; j++, c += 64) {
				r8 raw = R8_LOAD(row + c / 2);
				I4_NIBN(0, pa);
				I4_NIBN(1, pb);
				I4_NIBN(2, pa);
				I4_NIBN(3, pb);
				I4_NIBN(4, pa);
				I4_NIBN(5, pb);
				I4_NIBN(6, pa);
				I4_NIBN(7, pb);
			}
			v8 s = V8_BCAST(sc[gi]);
			for (int b = 0; b < NBc; b++)
				acc[b] = V8_FMA(V8_ADD(pa[b], pb[b]), s, acc[b]);
		}
		if (c < g1) {
			for (int b = 0; b < NBc; b++)
				accs[b] += i4_tail(row, x + b * xs, c, g1) * sc[gi];
		}
	}
	for (int b = 0; b < NBc; b++)
		y[b * ys] = v8_hsum(acc[b]) + accs[b];
}

static void I4_FN(matmul)(const uint8_t *w, long rb, const float *sc, long sp,
			  long rows, long cols, long gs,
			  const float *x, long xs, const float *xp, long ps,
			  long n, float *y, long ys) {
	int vec = (gs % 64 == 0) || gs >= cols;
	if (n == 1) {
		long r = 0;
		for (; r + 4 <= rows; r += 4)
			I4_FN(rows1)(w + r * rb, rb, sc + r * sp, sp, cols, gs, vec, x, xp, y + r, 4);
		for (; r < rows; r++)
			I4_FN(rows1)(w + r * rb, rb, sc + r * sp, sp, cols, gs, vec, x, xp, y + r, 1);
		return;
	}
	long tile = lmin(rows, TILE_BYTES / rb + 1);
	for (long r0 = 0; r0 < rows; r0 += tile) {
		long r1 = lmin(r0 + tile, rows);
		for (long b0 = 0; b0 < n; b0 += I4_NB) {
			long nb = lmin(I4_NB, n - b0);
			const float *xb = x + b0 * xs, *xpb = xp + b0 * ps;
			float *yb = y + b0 * ys;
			for (long r = r0; r < r1; r++) {
				const uint8_t *row = w + r * rb;
				const float *s = sc + r * sp;
				switch (nb) {
				case 4:
					I4_FN(rowsn)(row, s, cols, gs, vec, xb, xs, xpb, ps, yb + r, ys, 4);
					break;
				case 3:
					I4_FN(rowsn)(row, s, cols, gs, vec, xb, xs, xpb, ps, yb + r, ys, 3);
					break;
				case 2:
					I4_FN(rowsn)(row, s, cols, gs, vec, xb, xs, xpb, ps, yb + r, ys, 2);
					break;
				default:
					I4_FN(rows1)(row, rb, s, sp, cols, gs, vec, xb, xpb, yb + r, 1);
				}
			}
		}
	}
}

// vecmat: y[c] = sum_r fma(x[r]*scale, nib-8, y[c]) over rows in order for
// columns in full 64-blocks (accumulated permuted in yp), (x[r]*scale) *
// (nib-8) added for the columns past them.
static void I4_FN(vecmat)(const uint8_t *w, long rb, const float *sc, long sp,
			  long rows, long cols, long gs, const float *x,
			  long c0, long c1, float *y, float *yp) {
	int vec = (gs % 64 == 0) || gs >= cols;
	long v1 = c0;
	if (vec && lmin(c1, cols / 64 * 64) > c0)
		v1 = c0 + (lmin(c1, cols / 64 * 64) - c0) / 64 * 64;
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

#undef I4_NIBN
