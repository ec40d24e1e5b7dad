//go:build cgo && (amd64 || arm64)

package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// ransTableOf builds the decode table of frequencies summing to RANSTotal.
func ransTableOf(freq [RANSSymbols]int) *RANSTable {
	t := new(RANSTable)
	slot := 0
	for s, f := range freq {
		t.Freq[s], t.Start[s] = uint8(f), uint8(slot)
		for ; f > 0; f-- {
			t.Sym[slot] = uint8(s)
			slot++
		}
	}
	return t
}

// randomRANSTable builds a valid decode table from random frequencies,
// from one symbol taking every slot to all sixteen.
func randomRANSTable(rng *rand.Rand) *RANSTable {
	var freq [RANSSymbols]int
	left := RANSTotal
	for left > 0 {
		s := rng.IntN(1 + rng.IntN(RANSSymbols))
		n := min(left, 1+rng.IntN(32))
		freq[s] += n
		left -= n
	}
	return ransTableOf(freq)
}

// normalRANSTable is the table of int4 codes of normal weights quantized
// per row at absmax/7 (GLM-5.2's statistics).
func normalRANSTable() *RANSTable {
	return ransTableOf([RANSSymbols]int{0, 1, 1, 1, 3, 7, 15, 23, 26, 23, 15, 7, 3, 1, 1, 1})
}

// TestRANSDecodeISAs: every decode loop of rans.c gives the Go
// reference's bytes, states, nibble count and consumption on arbitrary
// input, streams cut short anywhere included.
func TestRANSDecodeISAs(t *testing.T) {
	loops := RANSLoops()
	if len(loops) < 2 || loops[0].String() != "go" {
		t.Fatalf("loops %v: want the Go reference first, then rans.c's", loops)
	}
	if s := loops[len(loops)-1].String(); s != RANSFeatures() {
		t.Fatalf("RANSFeatures %q is not the last loop, %q", RANSFeatures(), s)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 400; trial++ {
		tab := randomRANSTable(rng)
		if trial%4 == 0 {
			tab = normalRANSTable()
		}
		n := rng.IntN(6 * RANSLanes)
		if trial%3 == 0 {
			n = rng.IntN(40) * RANSLanes / 2
		}
		src := make([]byte, rng.IntN(3*n+2*RANSLanes+1))
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		var st0 [RANSLanes]uint16
		for l := range st0 {
			st0[l] = uint16(max(RANSLow, rng.IntN(1<<16)))
		}
		want := make([]byte, n)
		ws := st0
		wNib, wUsed := goRANSDecode(want, src, &ws, tab)
		for _, loop := range loops[1:] {
			got := make([]byte, n)
			gs := st0
			gNib, gUsed := loop.Decode(got, src, &gs, tab)
			if gNib != wNib || gUsed != wUsed || gs != ws || !bytes.Equal(got[:wNib/2], want[:wNib/2]) {
				t.Fatalf("trial %d (%d bytes, %d of stream) %s: nibbles %d/%d used %d/%d states equal %v bytes equal %v",
					trial, n, len(src), loop, gNib, wNib, gUsed, wUsed, gs == ws, bytes.Equal(got[:wNib/2], want[:wNib/2]))
			}
		}
	}
}

// BenchmarkRANSDecode decodes 1 MiB with GLM-5.2's code statistics from a
// random stream (which a rANS decoder consumes at the table's entropy, as
// it would a coded one): bytes/s is rebuilt output per core.
func BenchmarkRANSDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	tab := normalRANSTable()
	const n = 1 << 20
	out := make([]byte, n)
	src := make([]byte, 2*n)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, loop := range RANSLoops() {
		b.Run(loop.String(), func(b *testing.B) {
			b.SetBytes(n)
			var used int
			for range b.N {
				var st [RANSLanes]uint16
				for l := range st {
					st[l] = RANSLow
				}
				_, used = loop.Decode(out, src, &st, tab)
			}
			b.ReportMetric(float64(used)/n, "in/out")
		})
	}
}

func ExampleRANSFeatures() {
	fmt.Println(RANSFeatures() != "")
	// Output: true
}

// randomNibbles returns n bytes whose nibbles follow freq (every nibble of
// frequency 0 absent).
func randomNibbles(rng *rand.Rand, n int, freq *[RANSSymbols]uint8) []byte {
	var pick []uint8
	for s, f := range freq {
		for range f {
			pick = append(pick, uint8(s))
		}
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = pick[rng.IntN(len(pick))] | pick[rng.IntN(len(pick))]<<4
	}
	return b
}

// TestRANSEncodeMatchesGo: rans.c's encoder gives the Go reference's
// stream and states on any table and length, whole steps or not, and both
// refuse a nibble of frequency 0; every loop decodes the stream back.
func TestRANSEncodeMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := 0; trial < 300; trial++ {
		tab := randomRANSTable(rng)
		if trial%4 == 0 {
			tab = normalRANSTable()
		}
		n := rng.IntN(5 * RANSLanes)
		if trial%3 == 0 {
			n = rng.IntN(40) * RANSLanes / 2
		}
		src := randomNibbles(rng, n, &tab.Freq)
		zero := -1
		for s, f := range tab.Freq {
			if f == 0 {
				zero = s
			}
		}
		if trial%5 == 1 && zero >= 0 && n > 0 {
			src[rng.IntN(n)] = uint8(zero) << 4 // one nibble the table cannot code
		}
		var ws, gs [RANSLanes]uint16
		want, wok := goRANSEncode(make([]byte, 2*n+1), src, &tab.Freq, &ws)
		var got []byte
		for name, isa := range ransEncoders() {
			var ok bool
			got, ok = ransEncodeWith(isa, make([]byte, 2*n+1), src, &tab.Freq, &gs)
			if wok != ok {
				t.Fatalf("trial %d: Go ok %v, C %s ok %v", trial, wok, name, ok)
			}
			if !wok {
				break
			}
			if !bytes.Equal(got, want) || gs != ws {
				t.Fatalf("trial %d (%d bytes) %s: streams equal %v (%d, %d bytes), states equal %v", trial, n, name, bytes.Equal(got, want), len(got), len(want), gs == ws)
			}
		}
		if !wok {
			continue
		}
		for _, loop := range RANSLoops() {
			out := make([]byte, n)
			st := gs
			nib, used := loop.Decode(out, got, &st, tab)
			if nib != 2*n || used != len(got) || !bytes.Equal(out, src) {
				t.Fatalf("trial %d %s: decoded %d of %d nibbles, used %d of %d, equal %v", trial, loop, nib, 2*n, used, len(got), bytes.Equal(out, src))
			}
			for l, v := range st {
				if v != RANSLow {
					t.Fatalf("trial %d %s: lane %d ends at %d", trial, loop, l, v)
				}
			}
		}
	}
}

// BenchmarkRANSEncode codes 64 KiB (a pack block) with GLM-5.2's code
// statistics: bytes/s is raw input per core.
func BenchmarkRANSEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(23, 24))
	tab := normalRANSTable()
	const n = 64 << 10
	src := randomNibbles(rng, n, &tab.Freq)
	buf := make([]byte, 2*n+1)
	for _, enc := range []struct {
		name string
		f    func(buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) ([]byte, bool)
	}{{"go", goRANSEncode}, {"scalar C", func(buf, src []byte, freq *[RANSSymbols]uint8, state *[RANSLanes]uint16) ([]byte, bool) {
		return ransEncodeWith(ransEncoders()["scalar"], buf, src, freq, state)
	}}, {"default", RANSEncode}} {
		b.Run(enc.name, func(b *testing.B) {
			b.SetBytes(n)
			var st [RANSLanes]uint16
			for range b.N {
				enc.f(buf, src, &tab.Freq, &st)
			}
		})
	}
}
