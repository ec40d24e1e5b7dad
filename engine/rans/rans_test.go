package rans

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// gaussianCodes returns n bytes of two int4 codes each, quantized from
// normal values per row of rowLen codes at absmax/7, as a converter does.
func gaussianCodes(rng *rand.Rand, n, rowLen int) []byte {
	codes := make([]byte, 2*n)
	vals := make([]float64, rowLen)
	for r := 0; r < len(codes); r += rowLen {
		m := 0.0
		for i := range vals {
			vals[i] = rng.NormFloat64()
			m = max(m, math.Abs(vals[i]))
		}
		for i := 0; i < rowLen && r+i < len(codes); i++ {
			q := math.Round(vals[i] / (m / 7))
			codes[r+i] = byte(int(q) + 8)
		}
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = codes[2*i] | codes[2*i+1]<<4
	}
	return out
}

func tableFor(t testing.TB, p []byte) *Table {
	t.Helper()
	var h [Symbols]uint64
	Histogram(&h, p)
	tab, err := NewTable(&h)
	if err != nil {
		t.Fatal(err)
	}
	return &tab
}

func roundTrip(t *testing.T, src []byte) []byte {
	t.Helper()
	tab := tableFor(t, append([]byte{0}, src...))
	enc, err := Encode(nil, src, tab)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > MaxEncodedLen(len(src)) {
		t.Fatalf("%d coded bytes exceed the bound %d", len(enc), MaxEncodedLen(len(src)))
	}
	d, err := NewDecoder(tab)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range Loops() {
		out := make([]byte, len(src))
		if err := d.DecodeWith(l, out, enc); err != nil {
			t.Fatalf("%s: decode of %d bytes: %v", l, len(src), err)
		}
		if !bytes.Equal(out, src) {
			t.Fatalf("%s: decode of %d bytes differs", l, len(src))
		}
	}
	return enc
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	uniform := make([]byte, 100_003)
	for i := range uniform {
		uniform[i] = byte(rng.Uint32())
	}
	skewed := make([]byte, 70_001)
	for i := range skewed {
		skewed[i] = byte(min(255, int(rng.ExpFloat64()*3)))
	}
	cases := map[string][]byte{
		"empty":          {},
		"one byte":       {7},
		"one step":       bytes.Repeat([]byte{1, 2, 3, 4}, 8),
		"constant":       bytes.Repeat([]byte{0x88}, 10_000),
		"partial step":   gaussianCodes(rng, 31, 64),
		"gaussian int4":  gaussianCodes(rng, 1<<18, 6144),
		"gaussian short": gaussianCodes(rng, 12_345, 2048),
		"uniform":        uniform,
		"skewed":         skewed,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) { roundTrip(t, src) })
	}
}

// TestGaussianRatio: per-row int4 codes of normal weights code to about
// three quarters of their size, as the GLM-5.2 census found.
// TestSingleSymbol: a table with one byte of frequency Total codes any
// run of it in the states alone.
func TestSingleSymbol(t *testing.T) {
	src := bytes.Repeat([]byte{0x77}, 1000)
	tab := tableFor(t, src)
	if tab.Freq[7] != Total {
		t.Fatalf("frequency %d", tab.Freq[7])
	}
	enc, err := Encode(nil, src, tab)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != StateBytes {
		t.Fatalf("%d coded bytes, want %d", len(enc), StateBytes)
	}
	d, _ := NewDecoder(tab)
	out := make([]byte, len(src))
	if err := d.Decode(out, enc); err != nil || !bytes.Equal(out, src) {
		t.Fatalf("decode: %v", err)
	}
}

func TestGaussianRatio(t *testing.T) {
	src := gaussianCodes(rand.New(rand.NewPCG(3, 4)), 1<<20, 6144)
	enc := roundTrip(t, src)
	ratio := float64(len(enc)) / float64(len(src))
	if ratio < 0.6 || ratio > 0.8 {
		t.Fatalf("ratio %.3f, want about 0.75", ratio)
	}
	tab := tableFor(t, src)
	var h [Symbols]uint64
	Histogram(&h, src)
	est := tab.Bits(&h) / 8
	if got := float64(len(enc) - StateBytes); math.Abs(got-est)/est > 0.01 {
		t.Fatalf("coded %v bytes, table estimate %v", got, est)
	}
	t.Logf("ratio %.4f", ratio)
}

func TestNewTable(t *testing.T) {
	var h [Symbols]uint64
	if _, err := NewTable(&h); err == nil {
		t.Fatal("empty histogram accepted")
	}
	for s := range h {
		h[s] = uint64(s%7) * 1_000_003
	}
	h[3] = 1 // a rare nibble keeps a frequency
	tab, err := NewTable(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Validate(); err != nil {
		t.Fatal(err)
	}
	for s, c := range h {
		if (c > 0) != (tab.Freq[s] > 0) {
			t.Fatalf("nibble %d: count %d, frequency %d", s, c, tab.Freq[s])
		}
	}
	h = [Symbols]uint64{}
	h[9] = math.MaxUint64
	h[10] = 1
	if _, err := NewTable(&h); err == nil {
		t.Fatal("overflowing histogram accepted")
	}
}

func TestEncodeRefusesMissingSymbol(t *testing.T) {
	tab := tableFor(t, []byte{1, 2, 3})
	if _, err := Encode(nil, []byte{1, 4}, tab); err == nil {
		t.Fatal("byte of frequency 0 encoded")
	}
	bad := *tab
	bad.Freq[1]++
	if _, err := Encode(nil, []byte{1}, &bad); err == nil {
		t.Fatal("invalid table accepted")
	}
	if _, err := NewDecoder(&bad); err == nil {
		t.Fatal("invalid table accepted by NewDecoder")
	}
}

// TestDecodeRefusesCorruption flips, truncates and extends coded blocks:
// each is refused with ErrCorrupt.
func TestDecodeRefusesCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := gaussianCodes(rng, 50_000, 2048)
	tab := tableFor(t, src)
	enc, err := Encode(nil, src, tab)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(tab)
	out := make([]byte, len(src))
	bad := map[string][]byte{
		"short":       enc[:StateBytes-1],
		"truncated":   enc[:len(enc)-1],
		"extended":    append(append([]byte(nil), enc...), 0),
		"state below": append([]byte{0, 0, 0, 0}, enc[4:]...),
	}
	for name, c := range bad {
		if err := d.Decode(out, c); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	// A flipped byte of the stream is refused, or, rarely (16-bit lanes
	// can resynchronize), decodes to other bytes whose coding it is:
	// decoding is a bijection, never a silent misreading of the format.
	// Pack records carry checksums for the rest (engine/expertpack).
	const flips = 200
	refused := 0
	for i := 0; i < flips; i++ {
		c := append([]byte(nil), enc...)
		c[StateBytes+rng.IntN(len(c)-StateBytes)] ^= byte(1 + rng.IntN(255))
		err := d.Decode(out, c)
		if err == nil {
			again, err := Encode(nil, out, tab)
			if err != nil || !bytes.Equal(again, c) {
				t.Fatalf("flip %d decodes cleanly but does not re-encode to itself (%v)", i, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip %d: got %v, want ErrCorrupt", i, err)
		}
		refused++
	}
	if refused < flips*95/100 {
		t.Errorf("%d of %d flipped bytes refused, want at least 95%%", refused, flips)
	}
	if err := d.Decode(make([]byte, len(src)+1), enc); !errors.Is(err, ErrCorrupt) {
		t.Errorf("wrong length: got %v", err)
	}
}

// FuzzDecode: any bytes, table and length decode without a panic, and a
// successful decode re-encodes to the same block.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := gaussianCodes(rng, 3000, 128)
	var h [Symbols]uint64
	Histogram(&h, src)
	tab, _ := NewTable(&h)
	enc, _ := Encode(nil, src, &tab)
	f.Add(enc, uint16(len(src)), []byte{1, 2, 3})
	f.Add(enc[:200], uint16(100), []byte{0x88})
	f.Add([]byte{}, uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, block []byte, n uint16, sample []byte) {
		var h [Symbols]uint64
		Histogram(&h, sample)
		h[8]++
		tab, err := NewTable(&h)
		if err != nil {
			t.Fatal(err)
		}
		d, err := NewDecoder(&tab)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, int(n))
		if err := d.Decode(out, block); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := Encode(nil, out, &tab)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, block) {
			t.Fatalf("decoded block re-encodes differently")
		}
	})
}

// BenchmarkDecode decodes per-row int4 codes of normal weights (GLM-5.2's
// statistics) in 64 KiB blocks, as packed experts hold them, with every
// decode loop: bytes/s is rebuilt output per core.
func BenchmarkDecode(b *testing.B) {
	src := gaussianCodes(rand.New(rand.NewPCG(1, 1)), 4<<20, 6144)
	tab := tableFor(b, src)
	const block = 64 << 10
	var blocks [][]byte
	for p := 0; p < len(src); p += block {
		enc, err := Encode(nil, src[p:p+block], tab)
		if err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, enc)
	}
	d, _ := NewDecoder(tab)
	out := make([]byte, block)
	for _, l := range Loops() {
		b.Run(l.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for range b.N {
				for _, enc := range blocks {
					if err := d.DecodeWith(l, out, enc); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
