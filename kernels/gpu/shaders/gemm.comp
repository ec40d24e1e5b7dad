#version 450
// Tiled matrix product over quantized weights.
//   TRANS 0: y[n][m] = sum_k x[n][k] W[m][k]  (W rows are outputs: a Linear)
//   TRANS 1: y[n][m] = sum_k x[n][k] W[k][m]  (W rows are the reduction)
// W is f32, int8 with one scale per row, or int4 (two per byte, low nibble
// first, value (nibble - 8) * scale, one scale per row or per group of gs
// columns). Weights are dequantized into shared memory one BK-deep tile at a
// time; each thread accumulates a TM x TN block in registers. Byte offsets
// may be unaligned: bytes are extracted from 32-bit words.
//
// Batches: gl_WorkGroupID.z selects a W, x and y offset (heads) or, with
// GATHER, an entry of the table {W bytes, scales, rows, first row} and a row
// list (routed experts applied to the rows that chose them).
layout(local_size_x = 256) in;

layout(constant_id = 0) const uint FMT = 2;    // 0 f32, 1 int8, 2 int4
layout(constant_id = 1) const uint TRANS = 0;
layout(constant_id = 2) const uint BM = 64;    // outputs per tile, multiple of 16
layout(constant_id = 3) const uint BN = 64;    // input rows per tile, multiple of 16
layout(constant_id = 4) const uint GATHER = 0; // 1: x rows from the list, y compact; 2: x compact, y rows from the list
layout(constant_id = 5) const uint BK = 16;    // reduction depth of a tile: 16 or 32

const uint TM = BM / 16;
const uint TN = BN / 16;
const uint LW = BM * BK / 256; // W elements each thread loads per tile
const uint LX = BN * BK / 256; // x elements each thread loads per tile
const uint WS = BM + 1; // padded shared strides: no bank conflicts on store
const uint XS = BN + 1;

layout(std430, binding = 0) readonly buffer WData { uint wd[]; };
layout(std430, binding = 1) readonly buffer WScale { float sc[]; };
layout(std430, binding = 2) readonly buffer XBuf { float xs[]; };
layout(std430, binding = 3) writeonly buffer YBuf { float ys[]; };
layout(std430, binding = 4) readonly buffer Table { uint tab[]; };
layout(std430, binding = 5) readonly buffer Rows { uint rows[]; };

layout(push_constant) uniform Push {
	uint M, K, N;         // outputs, reduction length, input rows
	uint wOff, wLd;       // W: byte offset of stored element (0,0), bytes per stored row
	uint sOff, sLd, gs;   // scales: first scale, scales per stored row, columns per scale
	uint xOff, xLd;       // x: first value, values per row
	uint yOff, yLd;       // y
	uint zW, zS, zX, zY;  // per-z steps of wOff, sOff, xOff, yOff
	uint listOff;         // GATHER: first entry of the row list
} p;

shared float Ws[BK * WS];
shared float Xs[BK * XS];

uint wo, so, xo, yo, nz, base;

uint byteAt(uint a) { return (wd[a >> 2] >> ((a & 3u) * 8u)) & 0xffu; }

// w reads stored element (row, col) of this z's W.
float w(uint row, uint col) {
	if (FMT == 0) return uintBitsToFloat(wd[(wo + row * p.wLd) / 4u + col]);
	float s = sc[so + row * p.sLd + col / p.gs];
	if (FMT == 1) {
		int b = int(byteAt(wo + row * p.wLd + col));
		return float(b >= 128 ? b - 256 : b) * s;
	}
	uint b = byteAt(wo + row * p.wLd + (col >> 1));
	uint nib = (col & 1u) != 0u ? (b >> 4) : (b & 15u);
	return float(int(nib) - 8) * s;
}

uint xRow(uint n) { return GATHER == 1 ? rows[p.listOff + base + n] : (GATHER == 2 ? base + n : n); }
uint yRow(uint n) { return GATHER == 2 ? rows[p.listOff + base + n] : (GATHER == 1 ? base + n : n); }

float wreg[LW];
float xreg[LX];

void loadTile(uint m0, uint n0, uint k0, uint tid) {
	for (uint i = 0; i < LW; i++) {
		uint e = tid + 256u * i;
		uint m, k;
		if (TRANS == 0) { m = e / BK; k = e % BK; } else { m = e % BM; k = e / BM; }
		uint gm = m0 + m, gk = k0 + k;
		float v = 0.0;
		if (gm < p.M && gk < p.K) v = TRANS == 0 ? w(gm, gk) : w(gk, gm);
		wreg[i] = v;
	}
	for (uint j = 0; j < LX; j++) {
		uint e = tid + 256u * j;
		uint n = e / BK, k = e % BK;
		uint gn = n0 + n, gk = k0 + k;
		float v = 0.0;
		if (gn < nz && gk < p.K) v = xs[xo + xRow(gn) * p.xLd + gk];
		xreg[j] = v;
	}
}

void storeTile(uint tid) {
	for (uint i = 0; i < LW; i++) {
		uint e = tid + 256u * i;
		uint m, k;
		if (TRANS == 0) { m = e / BK; k = e % BK; } else { m = e % BM; k = e / BM; }
		Ws[k * WS + m] = wreg[i];
	}
	for (uint j = 0; j < LX; j++) {
		uint e = tid + 256u * j;
		Xs[(e % BK) * XS + e / BK] = xreg[j];
	}
}

void main() {
	uint z = gl_WorkGroupID.z;
	if (GATHER != 0) {
		wo = tab[4u * z];
		so = tab[4u * z + 1u];
		nz = tab[4u * z + 2u];
		base = tab[4u * z + 3u];
		xo = p.xOff;
		yo = p.yOff;
	} else {
		wo = p.wOff + z * p.zW;
		so = p.sOff + z * p.zS;
		xo = p.xOff + z * p.zX;
		yo = p.yOff + z * p.zY;
		nz = p.N;
		base = 0u;
	}
	uint m0 = gl_WorkGroupID.x * BM;
	uint n0 = gl_WorkGroupID.y * BN;
	if (n0 >= nz) return; // uniform for the whole workgroup
	uint tid = gl_LocalInvocationID.x;
	uint tx = tid % 16u, ty = tid / 16u;

	float acc[TM * TN];
	for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

	loadTile(m0, n0, 0u, tid);
	for (uint k0 = 0; k0 < p.K; k0 += BK) {
		barrier();
		storeTile(tid);
		barrier();
		if (k0 + BK < p.K) loadTile(m0, n0, k0 + BK, tid);
		for (uint k = 0; k < BK; k++) {
			float a[TM];
			for (uint i = 0; i < TM; i++) a[i] = Ws[k * WS + tx + 16u * i];
			for (uint j = 0; j < TN; j++) {
				float b = Xs[k * XS + ty + 16u * j];
				for (uint i = 0; i < TM; i++) acc[i * TN + j] += a[i] * b;
			}
		}
	}
	for (uint j = 0; j < TN; j++) {
		uint n = n0 + ty + 16u * j;
		if (n >= nz) continue;
		uint yb = yo + yRow(n) * p.yLd;
		for (uint i = 0; i < TM; i++) {
			uint m = m0 + tx + 16u * i;
			if (m < p.M) ys[yb + m] = acc[i * TN + j];
		}
	}
}
