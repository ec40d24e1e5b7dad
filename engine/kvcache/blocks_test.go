package kvcache

import (
	"errors"
	"slices"
	"testing"
)

var blockGeo = Geometry{Layers: 3, KVLora: 4, Rope: 2, IndexDim: 3, Indexer: []bool{true, false, true}, MTP: true}

// filled returns a sequence of n tokens whose every stored value is
// distinct, with mtp MTP rows (positions 0..mtp-1).
func filled(t *testing.T, g Geometry, n, mtp int) *Sequence {
	t.Helper()
	s := New(g, 1000)
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = 100 + i
	}
	if err := s.Reserve(tokens); err != nil {
		t.Fatal(err)
	}
	W := g.KVLora + g.Rope
	for p := 0; p < n; p++ {
		for l := 0; l < g.Layers; l++ {
			kv := make([]float32, W)
			for j := range kv {
				kv[j] = float32(p*10000 + l*100 + j)
			}
			var idx []float32
			if g.indexer(l) {
				idx = make([]float32, g.IndexDim)
				for j := range idx {
					idx[j] = -float32(p*10000 + l*100 + j)
				}
			}
			s.Layer(l).Append(kv, idx)
		}
	}
	for p := 0; p < mtp; p++ {
		kv := make([]float32, W)
		for j := range kv {
			kv[j] = float32(p*10000+j) + 0.5
		}
		s.MTP().Append(kv, nil)
	}
	return s
}

func sameState(t *testing.T, got, want *Sequence) {
	t.Helper()
	if !slices.Equal(got.Tokens(), want.Tokens()) {
		t.Fatalf("tokens %v, want %v", got.Tokens(), want.Tokens())
	}
	for l := range want.layers {
		g, w := got.Layer(l), want.Layer(l)
		if g.Len() != w.Len() || !slices.Equal(g.kv.f32, w.kv.f32) || !slices.Equal(g.kv.b16, w.kv.b16) || !slices.Equal(g.index.f32, w.index.f32) || !slices.Equal(g.index.b16, w.index.b16) {
			t.Fatalf("layer %d differs: %d rows, want %d", l, g.Len(), w.Len())
		}
	}
	if got.MTP().Len() != want.MTP().Len() || !slices.Equal(got.MTP().KV(0, got.MTP().Len(), make([]float32, got.MTP().Len()*got.geo.MTPFloats())), want.MTP().KV(0, want.MTP().Len(), make([]float32, want.MTP().Len()*want.geo.MTPFloats()))) {
		t.Fatalf("MTP differs: %d rows, want %d", got.MTP().Len(), want.MTP().Len())
	}
}

func TestBlockRoundTrip(t *testing.T) {
	const n = 40
	src := filled(t, blockGeo, n, n-1)
	bounds := [][2]int{{0, 16}, {16, 32}, {32, 40}}
	dst := New(blockGeo, 1000)
	for _, b := range bounds {
		blk, err := src.ExportBlock(nil, b[0], b[1], true)
		if err != nil {
			t.Fatal(err)
		}
		if len(blk) != blockGeo.BlockFloats(b[0], b[1], true) {
			t.Fatalf("block [%d,%d) has %d values, want %d", b[0], b[1], len(blk), blockGeo.BlockFloats(b[0], b[1], true))
		}
		aligned, err := dst.ImportBlock(b[0], src.Tokens()[b[0]:b[1]], blk, true)
		if err != nil {
			t.Fatal(err)
		}
		if !aligned {
			t.Fatalf("MTP not aligned after block [%d,%d)", b[0], b[1])
		}
	}
	sameState(t, dst, src)
	if got := blockGeo.MainFloats() * 4; int64(got)+int64(blockGeo.MTPFloats()*4) != blockGeo.BytesPerToken() {
		t.Errorf("main %d + MTP %d bytes per token, BytesPerToken %d", got, blockGeo.MTPFloats()*4, blockGeo.BytesPerToken())
	}
}

// TestBlockImportIntoPrefix: a sequence holding part of a block takes the
// rest of it; the MTP rows continue where the sequence's end.
func TestBlockImportIntoPrefix(t *testing.T) {
	src := filled(t, blockGeo, 32, 31)
	blk0, _ := src.ExportBlock(nil, 0, 16, true)
	blk1, _ := src.ExportBlock(nil, 16, 32, true)

	dst := filled(t, blockGeo, 20, 19) // same values as src for 0..19
	if _, err := dst.ImportBlock(0, src.Tokens()[:16], blk0, true); err != nil {
		t.Fatal(err) // wholly covered: nothing appended
	}
	if dst.Len() != 20 {
		t.Fatalf("covered block changed the length to %d", dst.Len())
	}
	aligned, err := dst.ImportBlock(16, src.Tokens()[16:32], blk1, true)
	if err != nil || !aligned {
		t.Fatalf("aligned %v, err %v", aligned, err)
	}
	sameState(t, dst, src)

	// An MTP cache that stops before the block's range is left alone.
	gap := filled(t, blockGeo, 16, 3)
	aligned, err = gap.ImportBlock(16, src.Tokens()[16:32], blk1, true)
	if err != nil || aligned || gap.MTP().Len() != 3 || gap.Len() != 32 {
		t.Fatalf("gap: aligned %v, MTP %d rows, len %d, err %v", aligned, gap.MTP().Len(), gap.Len(), err)
	}
	// Blocks without MTP rows leave the MTP cache as it is.
	plain, _ := src.ExportBlock(nil, 0, 16, false)
	dst = New(blockGeo, 1000)
	if aligned, err := dst.ImportBlock(0, src.Tokens()[:16], plain, false); err != nil || aligned || dst.MTP().Len() != 0 {
		t.Fatalf("plain block: aligned %v, MTP %d, err %v", aligned, dst.MTP().Len(), err)
	}
}

func TestBlockErrors(t *testing.T) {
	src := filled(t, blockGeo, 16, 4)
	if _, err := src.ExportBlock(nil, 0, 17, false); err == nil {
		t.Error("export past the end")
	}
	if _, err := src.ExportBlock(nil, 0, 16, true); err == nil {
		t.Error("export of MTP rows the cache lacks")
	}
	noMTP := blockGeo
	noMTP.MTP = false
	if _, err := New(noMTP, 10).ExportBlock(nil, 0, 0, false); err == nil {
		t.Error("empty export")
	}
	blk, _ := src.ExportBlock(nil, 0, 16, false)
	if _, err := New(blockGeo, 1000).ImportBlock(0, src.Tokens(), blk[:len(blk)-1], false); err == nil {
		t.Error("short block accepted")
	}
	if _, err := New(blockGeo, 1000).ImportBlock(16, src.Tokens(), blk, false); err == nil {
		t.Error("block past the end of an empty sequence accepted")
	}
	other := New(blockGeo, 1000)
	other.Reserve([]int{7})
	other.Layer(0).Append(make([]float32, 6), make([]float32, 3))
	other.Layer(1).Append(make([]float32, 6), nil)
	other.Layer(2).Append(make([]float32, 6), make([]float32, 3))
	if _, err := other.ImportBlock(0, src.Tokens(), blk, false); err == nil {
		t.Error("block over different tokens accepted")
	}
	var ce *ContextError
	if _, err := New(blockGeo, 10).ImportBlock(0, src.Tokens(), blk, false); !errors.As(err, &ce) {
		t.Errorf("import past the limit: %v", err)
	}
	reserved := New(blockGeo, 1000)
	reserved.Reserve([]int{100})
	if _, err := reserved.ImportBlock(0, src.Tokens(), blk, false); err == nil {
		t.Error("import into a sequence mid-forward accepted")
	}
}

// TestMTPCacheFromAPosition: an MTP cache that starts past 0 finds its
// rows by position; export, import and trim follow positions, and only a
// cache that holds every row from 0 reports itself aligned.
func TestMTPCacheFromAPosition(t *testing.T) {
	src := filled(t, blockGeo, 48, 47)
	late := filled(t, blockGeo, 48, 0)
	late.ResetMTP(10)
	for p := 10; p < 47; p++ {
		late.MTP().Append(src.MTP().KV(p, p+1, nil), nil)
	}
	if late.mtpFrom != 10 || late.MTPEnd() != 47 || !late.HasMTPRows(15, 47) || late.HasMTPRows(9, 20) {
		t.Fatalf("from %d end %d", late.mtpFrom, late.MTPEnd())
	}
	if _, err := late.ExportBlock(nil, 0, 16, true); err == nil {
		t.Error("exported MTP rows the cache does not hold")
	}
	got, err := late.ExportBlock(nil, 16, 32, true)
	want, _ := src.ExportBlock(nil, 16, 32, true)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("block [16, 32) from a late MTP cache differs (err %v)", err)
	}
	// Importing continues the late cache; it is still not aligned.
	dst := filled(t, blockGeo, 16, 0)
	dst.ResetMTP(15)
	if aligned, err := dst.ImportBlock(16, src.Tokens()[16:32], want, true); err != nil || aligned || dst.MTPEnd() != 31 || dst.MTP().Len() != 16 {
		t.Fatalf("late import: aligned %v, end %d, rows %d, err %v", aligned, dst.MTPEnd(), dst.MTP().Len(), err)
	}
	if !slices.Equal(dst.MTP().KV(0, dst.MTP().Len(), nil), src.MTP().KV(15, 31, nil)) {
		t.Error("imported MTP rows differ")
	}
	// Trim keeps the rows of positions below n; below the start it empties
	// the cache, which then starts at n.
	late.Trim(30)
	if late.MTPEnd() != 30 || late.mtpFrom != 10 {
		t.Errorf("trim 30: MTP [%d, %d)", late.mtpFrom, late.MTPEnd())
	}
	late.Trim(4)
	if late.MTPEnd() != 4 || late.mtpFrom != 4 || late.MTP().Len() != 0 {
		t.Errorf("trim 4: MTP [%d, %d)", late.mtpFrom, late.MTPEnd())
	}
}
