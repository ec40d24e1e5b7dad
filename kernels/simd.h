// SIMD kernels behind the cgo fast path (see simd.c). All pointers are
// caller-owned; no function allocates or keeps a pointer after returning.
#ifndef SPOOL_KERNELS_SIMD_H
#define SPOOL_KERNELS_SIMD_H

#include <stdint.h>

// Instruction sets of the int4 decoders (amd64; arm64 has only NEON). All
// give bit-identical results.
#define SPOOL_ISA_AVX2 0
#define SPOOL_ISA_AVX512 1

// spool_i4_perm writes the block-permuted copy of n input vectors for the
// int4 kernels: for every full 64-column block, xp[k*8+l] = x[8*l+k].
void spool_i4_perm(const float *x, long xs, long n, long cols, float *xp, long ps);

// spool_i4_matmul computes y[b*ys + r] for rows [0, rows) and inputs
// b in [0, n) of an int4 matrix (gs = group size, cols for per-row scales)
// with the decoder isa (SPOOL_ISA_*; ignored on arm64).
void spool_i4_matmul(const uint8_t *w, long rb, const float *sc, long sp,
                     long rows, long cols, long gs,
                     const float *x, long xs, const float *xp, long ps,
                     long n, float *y, long ys, int isa);

// spool_i8_matmul and spool_f32_matmul are the int8-row and f32 analogues
// (ws is the f32 row stride in floats).
void spool_i8_matmul(const uint8_t *w, const float *sc, long rows, long cols,
                     const float *x, long xs, long n, float *y, long ys);
void spool_f32_matmul(const float *w, long ws, long rows, long cols,
                      const float *x, long xs, long n, float *y, long ys);

// spool_*_vecmat accumulate y[c] = sum_r x[r] W[r, c] for c in [c0, c1),
// c0 a multiple of 64; yp is scratch of at least c1-c0 floats (int4 only).
void spool_i4_vecmat(const uint8_t *w, long rb, const float *sc, long sp,
                     long rows, long cols, long gs, const float *x,
                     long c0, long c1, float *y, float *yp, int isa);
void spool_i8_vecmat(const uint8_t *w, const float *sc, long rows, long cols,
                     const float *x, long c0, long c1, float *y);
void spool_f32_vecmat(const float *w, long ws, long rows, const float *x,
                      long c0, long c1, float *y);

// spool_read_sum reads the first n/128*128 bytes of p with vector loads and
// returns their checksum; the memory read bandwidth probe of the benchmark.
uint64_t spool_read_sum(const uint8_t *p, long n);

#endif
