//go:build cgo && (amd64 || arm64)

package kernels

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// randomRANSTable builds a valid decode table from random frequencies.
func randomRANSTable(rng *rand.Rand) *RANSTable {
	var freq [256]int
	left := 1 << RANSScaleBits
	for left > 0 {
		s := rng.IntN(1 + rng.IntN(256))
		n := min(left, 1+rng.IntN(64))
		freq[s] += n
		left -= n
	}
	t := new(RANSTable)
	slot := 0
	for s, f := range freq {
		for j := 0; j < f; j++ {
			t[slot] = uint32(s) | uint32(f-1)<<8 | uint32(j)<<20
			slot++
		}
	}
	return t
}

// TestRANSDecodeISAs: every decode loop of rans.c gives the portable Go
// loop's bytes, states and consumption on arbitrary input.
func TestRANSDecodeISAs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	isas := []int{0}
	if ransISA() != 0 {
		isas = append(isas, ransISA())
	}
	for trial := 0; trial < 200; trial++ {
		tab := randomRANSTable(rng)
		n := rng.IntN(40) * RANSLanes
		src := make([]byte, rng.IntN(3000))
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		var st0 [RANSLanes]uint32
		for l := range st0 {
			st0[l] = max(RANSLow, rng.Uint32())
		}
		want := make([]byte, n)
		ws := st0
		wSteps, wUsed := goRANSDecodeSteps(want, src, &ws, tab)
		for _, isa := range isas {
			got := make([]byte, n)
			gs := st0
			gSteps, gUsed := ransDecodeStepsISA(got, src, &gs, tab, isa)
			if gSteps != wSteps || gUsed != wUsed || gs != ws || !bytes.Equal(got, want) {
				t.Fatalf("trial %d isa %d: steps %d/%d used %d/%d states equal %v bytes equal %v",
					trial, isa, gSteps, wSteps, gUsed, wUsed, gs == ws, bytes.Equal(got, want))
			}
		}
	}
}

func BenchmarkRANSDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	tab := randomRANSTable(rng)
	const n = 1 << 20
	out := make([]byte, n)
	src := make([]byte, 2*n)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, isa := range []int{-1, 0, ransISA()} {
		name := map[int]string{-1: "go", 0: "c", 1: "avx512"}[isa]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n)
			for range b.N {
				var st [RANSLanes]uint32
				for l := range st {
					st[l] = RANSLow
				}
				if isa < 0 {
					goRANSDecodeSteps(out, src, &st, tab)
				} else {
					ransDecodeStepsISA(out, src, &st, tab, isa)
				}
			}
		})
	}
}
