package expertpack

// CRC-32C of a whole from the CRC-32Cs of its parts: blocks decoded out of
// order are checksummed as they are decoded (their bytes hot in the
// cache) and the sums combined in order. crc(A||B) = shift(crc(A), |B|) ^
// crc(B), where shift multiplies by x^(8|B|) in the CRC's field (the
// reflected Castagnoli polynomial), done as a product by the precomputed
// operators of x^(8*2^k), one per set bit of |B|.

// crcOps[k] is the operator of x^(8*2^k): 32 columns, the image of each
// bit of the CRC.
var crcOps = buildCRCOps()

const castagnoliReflected = 0x82f63b78

func buildCRCOps() [40][32]uint32 {
	var ops [40][32]uint32
	// x^1: one zero bit through the register.
	var one [32]uint32
	one[0] = castagnoliReflected
	for i := 1; i < 32; i++ {
		one[i] = 1 << (i - 1)
	}
	// x^8, then squared on.
	sq := square(one)   // x^2
	sq = square(sq)     // x^4
	ops[0] = square(sq) // x^8: one byte
	for k := 1; k < len(ops); k++ {
		ops[k] = square(ops[k-1])
	}
	return ops
}

func apply(m *[32]uint32, v uint32) uint32 {
	var out uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			out ^= m[i]
		}
	}
	return out
}

func square(m [32]uint32) [32]uint32 {
	var out [32]uint32
	for i := range m {
		out[i] = apply(&m, m[i])
	}
	return out
}

// crcCombine is the CRC-32C of A||B from crc(A), crc(B) and B's length.
func crcCombine(a, b uint32, n int64) uint32 {
	for k := 0; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			a = apply(&crcOps[k], a)
		}
	}
	return a ^ b
}
