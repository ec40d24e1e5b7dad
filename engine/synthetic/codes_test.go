package synthetic

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNormalCodes: CodesNormal nibbles carry about 3.04 bits each (the
// GLM-5.2 census: 24% fewer bytes), never use code 0 (-8), and the scales
// keep a weight's standard deviation at 1/sqrt(cols).
func TestNormalCodes(t *testing.T) {
	chunk := make([]byte, 3072*256)
	fillChunk(chunk, tensor{fill: fillNormalInt4, row: 3072}, rand.NewPCG(1, 2), 0)
	var h [16]float64
	for _, b := range chunk {
		h[b&15]++
		h[b>>4]++
	}
	var bits float64
	n := float64(2 * len(chunk))
	for _, c := range h {
		if c > 0 {
			bits -= c / n * math.Log2(c/n)
		}
	}
	if h[0] != 0 || bits < 2.95 || bits > 3.15 {
		t.Fatalf("entropy %.3f bits a code (code 0 seen %v times), want about 3.04 and never", bits, h[0])
	}
	t.Logf("%.3f bits a code, code std %.3f", bits, normalCodeStd())
}

// TestUseNormalCodes: only routed experts' int4 weights switch, drawn row
// by row, and their scales grow so that code std x scale is unchanged.
func TestUseNormalCodes(t *testing.T) {
	opts := Options{SparseLayers: 1, Experts: 8}
	if err := opts.normalize(); err != nil {
		t.Fatal(err)
	}
	cfg := modelConfig(&opts)
	plain := layout(cfg, int4Row)
	normal := layout(cfg, int4Row)
	useNormalCodes(normal, cfg)
	switched := 0
	for i := range plain {
		for j, a := range plain[i].tensors {
			b := normal[i].tensors[j]
			isExpert := strings.Contains(a.name, ".mlp.experts.")
			switch {
			case !isExpert && (a.fill != b.fill || a.base != b.base):
				t.Fatalf("%s changed", a.name)
			case isExpert && a.fill == fillInt4:
				want := int64(3072)
				if strings.Contains(a.name, "down_proj") {
					want = 1024
				}
				if b.fill != fillNormalInt4 || b.row != want {
					t.Fatalf("%s: fill %v row %d", a.name, b.fill, b.row)
				}
				switched++
			case isExpert && a.fill == fillScales:
				if got, want := float64(b.base)*normalCodeStd(), float64(a.base)*int4Std; math.Abs(got-want)/want > 1e-6 {
					t.Fatalf("%s: scale base %v, want %v", a.name, b.base, want/normalCodeStd())
				}
			}
		}
	}
	if switched != 3*8 {
		t.Fatalf("%d expert weights switched, want 24", switched)
	}
}
