package kvcache

import (
	"math"
	"slices"
	"testing"
)

// TestBF16Rounding: float32 values round to the nearest bfloat16, ties to
// the even one; infinities, zeros and NaN keep their kind; a value past
// the largest bfloat16 rounds to infinity, as IEEE rounding does; and
// widening is exact.
func TestBF16Rounding(t *testing.T) {
	f := math.Float32frombits
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{f(0x3f808000), 0x3f80}, // halfway, even below
		{f(0x3f818000), 0x3f82}, // halfway, even above
		{f(0x3f808001), 0x3f81}, // past halfway
		{f(0x3f807fff), 0x3f80},
		{-2.5, 0xc020},
		{0, 0},
		{float32(math.Copysign(0, -1)), 0x8000},
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		{f(0x7f7fffff), 0x7f80}, // the largest float32 rounds past the largest bfloat16
		{f(0x00010000), 0x0001}, // a subnormal kept
		{f(0x00008000), 0x0000}, // halfway to the smallest subnormal: even
	} {
		var got [1]uint16
		ToBF16(got[:], []float32{tc.in})
		if got[0] != tc.want {
			t.Errorf("ToBF16(%g = %#08x) = %#04x, want %#04x", tc.in, math.Float32bits(tc.in), got[0], tc.want)
		}
		var back [1]float32
		FromBF16(back[:], got[:])
		if math.Float32bits(back[0]) != uint32(tc.want)<<16 {
			t.Errorf("FromBF16(%#04x) = %#08x", tc.want, math.Float32bits(back[0]))
		}
	}
	var nan [1]uint16
	ToBF16(nan[:], []float32{f(0x7f800001)}) // a NaN whose payload is all in the low bits
	var back [1]float32
	FromBF16(back[:], nan[:])
	if !math.IsNaN(float64(back[0])) {
		t.Errorf("a NaN became %#04x", nan[0])
	}
}

// TestBF16Sequence: a bfloat16 sequence stores half the bytes, hands back
// every value rounded, exports blocks of the rounded values that import
// into another bfloat16 sequence unchanged, and trims as a float32 one.
func TestBF16Sequence(t *testing.T) {
	g := blockGeo
	g.BF16 = true
	s := filled(t, g, 40, 39)
	f32 := filled(t, blockGeo, 40, 39)
	if s.Bytes()*2 != f32.Bytes() || g.BytesPerToken()*2 != blockGeo.BytesPerToken() {
		t.Errorf("bfloat16 %d bytes (%d a token), float32 %d (%d)", s.Bytes(), g.BytesPerToken(), f32.Bytes(), blockGeo.BytesPerToken())
	}
	W := g.KVLora + g.Rope
	for l := range g.Layers {
		got := s.Layer(l).KV(0, 40, make([]float32, 40*W))
		want := f32.Layer(l).KV(0, 40, nil)
		rounded := make([]uint16, len(want))
		ToBF16(rounded, want)
		widened := make([]float32, len(want))
		FromBF16(widened, rounded)
		if !slices.Equal(got, widened) {
			t.Fatalf("layer %d: the rows are not the float32 ones rounded", l)
		}
		copied := make([]float32, 3*W)
		s.Layer(l).CopyKV(copied, 5, 8)
		if !slices.Equal(copied, widened[5*W:8*W]) {
			t.Errorf("layer %d: CopyKV differs from KV", l)
		}
		if s.Layer(l).KVBF16(40) == nil || f32.Layer(l).KVBF16(40) != nil || !s.Layer(l).BF16() {
			t.Errorf("layer %d: raw bfloat16 rows missing or present on float32", l)
		}
	}
	block, err := s.ExportBlock(nil, 0, 40, true)
	if err != nil {
		t.Fatal(err)
	}
	dst := New(g, 1000)
	if _, err := dst.ImportBlock(0, s.Tokens(), block, true); err != nil {
		t.Fatal(err)
	}
	sameState(t, dst, s)
	s.Trim(10)
	if s.Layer(0).Len() != 10 || s.Layer(0).kv.length() != 10*W || s.MTP().Len() != 10 || s.Bytes() != 10*g.BytesPerToken() {
		t.Errorf("trim to 10: %d rows, %d values, %d bytes", s.Layer(0).Len(), s.Layer(0).kv.length(), s.Bytes())
	}
}
