// SIMD kernels behind the cgo fast path (see simd.c). All pointers are
// caller-owned; no function allocates or keeps a pointer after returning.
#ifndef SPOOL_KERNELS_SIMD_H
#define SPOOL_KERNELS_SIMD_H

#include <stdint.h>

// Instruction sets of the amd64 kernels (arm64 has only NEON and ignores
// the argument). All give bit-identical results.
#define SPOOL_ISA_AVX2 0
#define SPOOL_ISA_AVX512 1

// spool_*_dots set y[b*ys + r] to the dot product of row r (r < rows) with
// input b (b < n, input b at x + b*xs, cols values). f32 rows are ws floats
// apart; int8 rows are cols bytes apart with one scale each; int4 rows are
// rb bytes apart with sp scales each, one per group of gs columns.
void spool_f32_dots(const float *w, long ws, long rows, long cols, const float *x, long xs, long n,
		    float *y, long ys, int isa);
void spool_i8_dots(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long xs,
		   long n, float *y, long ys, int isa);
void spool_i4_dots(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long xs, long n, float *y, long ys, int isa);

// spool_*_wsum set y[c] = sum_r x[r] W[r, c] for c in [c0, c1), c0 a
// multiple of 16 (the transposed product; the matrix layouts are those of
// the dots functions). spool_f32_wsum does it for n vectors x + b*xs into
// y + b*ys.
void spool_f32_wsum(const float *w, long ws, long rows, const float *x, long xs, long n, long c0, long c1,
		    float *y, long ys, int isa);
void spool_i8_wsum(const uint8_t *w, const float *sc, long rows, long cols, const float *x, long c0,
		   long c1, float *y, int isa);
void spool_i4_wsum(const uint8_t *w, long rb, const float *sc, long sp, long rows, long cols, long gs,
		   const float *x, long c0, long c1, float *y, int isa);

// spool_read_sum reads the first n/128*128 bytes of p with vector loads and
// returns their checksum; the memory read bandwidth probe of the benchmark.
uint64_t spool_read_sum(const uint8_t *p, long n);

#endif
