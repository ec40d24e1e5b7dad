// Package crc32c owns the CRC-32C (Castagnoli) checksums of the weights'
// bytes: the per-extent checksums the fingerprint takes and the streamed
// tier checks every read against, and the packs' record checksums. The
// sums are hash/crc32's with the Castagnoli table, which runs on the
// CPU's CRC instructions (SSE 4.2, ARMv8 CRC32); Combine joins the sums
// of adjacent byte ranges, so that ranges read in parallel are checked as
// one.
package crc32c

import "hash/crc32"

// Table is the Castagnoli table (hash/crc32 accelerates its sums).
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// Update is the CRC-32C of the bytes summed in crc followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, Table, b) }

// Combine is the CRC-32C of A followed by B, given crcA of A, crcB of B
// and B's length: zlib's crc32_combine (the sum is linear over GF(2), so
// A's sum is carried past lenB zero bytes by squaring an operator matrix,
// in log2(lenB) steps) for the reflected Castagnoli polynomial.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32 // operators for 2^n and 2^(n+1) zero bits
	odd[0] = 0x82F63B78      // one zero bit: the reflected polynomial
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	square(even[:], odd[:]) // two zero bits
	square(odd[:], even[:]) // four zero bits
	// Apply lenB zero bytes to crcA, one bit of lenB at a time: the first
	// square gives the operator for one zero byte.
	for {
		square(even[:], odd[:])
		if lenB&1 != 0 {
			crcA = times(even[:], crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		square(odd[:], even[:])
		if lenB&1 != 0 {
			crcA = times(odd[:], crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

// times applies the operator mat to vec.
func times(mat []uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

// square sets sq to mat applied twice.
func square(sq, mat []uint32) {
	for n := range 32 {
		sq[n] = times(mat, mat[n])
	}
}
