package experts_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/kernels"
)

// digest hashes an expert's three matrices: format, shape, bytes, scales.
func digest(x *experts.Expert) string {
	h := sha256.New()
	var b [8]byte
	for _, m := range []*kernels.Matrix{x.Gate, x.Up, x.Down} {
		for _, v := range []int{int(m.Format), m.Rows, m.Cols, m.GroupSize} {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		}
		h.Write(m.Data)
		for _, f := range m.Scales {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(f))
			h.Write(b[:4])
		}
		for _, f := range m.F32 {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(f))
			h.Write(b[:4])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func runtimeYield() { runtime.Gosched() }

// xorshift is a small deterministic generator for the tests.
type xorshift struct{ s uint64 }

func newRand(seed uint64) *xorshift { return &xorshift{s: seed*0x9E3779B97F4A7C15 + 1} }

func (r *xorshift) next() uint64 {
	r.s ^= r.s << 13
	r.s ^= r.s >> 7
	r.s ^= r.s << 17
	return r.s
}

func (r *xorshift) intn(n int) int { return int(r.next() % uint64(n)) }

// sample returns k distinct values of [0, n), ascending.
func (r *xorshift) sample(n, k int) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for i := 0; i < k; i++ {
		j := i + r.intn(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	out := perm[:k]
	slices.Sort(out)
	return out
}

func fmtRecord(layer, expert, count int) string {
	return fmt.Sprintf("%d %d %d\n", layer, expert, count)
}
