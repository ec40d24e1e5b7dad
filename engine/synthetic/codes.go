package synthetic

import (
	"github.com/spoolhq/spool/engine/config"
	"math"
	"strings"

	"github.com/spoolhq/spool/engine/container"
)

// Codes says how the int4 codes of routed experts are drawn.
type Codes uint8

const (
	// CodesUniform draws every nibble uniformly (incompressible bytes).
	CodesUniform Codes = iota
	// CodesNormal draws nibbles as per-row int4 quantization of normal
	// weights does (q = round(w / (absmax/7)) + 8) with absmax 3.5
	// standard deviations, whose entropy (about 3.04 bits a code) matches
	// the census of the GLM-5.2 artifact's experts: about 24% fewer bytes
	// under a static entropy coder.
	CodesNormal
)

// normalAbsmax is the row absmax, in standard deviations, of CodesNormal.
const normalAbsmax = 3.5

// normalCodes is normalCodeTable's result, built once (never written).
var normalCodes = normalCodeTable()

// normalCodeTable maps 16 random bits to a code of the quantized normal
// distribution: entry u is the code whose probability interval holds
// (u+0.5)/65536.
func normalCodeTable() *[1 << 16]byte {
	var t [1 << 16]byte
	step := normalAbsmax / 7
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	q := -7
	for u := range t {
		p := (float64(u) + 0.5) / (1 << 16)
		for q < 7 && p > cdf((float64(q)+0.5)*step) {
			q++
		}
		t[u] = byte(q + 8)
	}
	return &t
}

// normalCodeStd is the standard deviation of a CodesNormal code (q - 8),
// which sizes the scales so that weights keep their variance.
func normalCodeStd() float64 {
	var s float64
	for _, c := range normalCodes {
		v := float64(int(c) - 8)
		s += v * v
	}
	return math.Sqrt(s / float64(len(normalCodes)))
}

// useNormalCodes switches the routed experts' int4 weights of shards to
// CodesNormal, rescaling their scales to match.
func useNormalCodes(shards []shardSpec, c *config.Config) {
	cols := map[string]int{}
	for _, l := range c.SparseLayers() {
		for e := 0; e < c.NumRoutedExperts; e++ {
			cols[container.ExpertName(l, e, "gate_proj")] = c.HiddenSize
			cols[container.ExpertName(l, e, "up_proj")] = c.HiddenSize
			cols[container.ExpertName(l, e, "down_proj")] = c.MoEIntermediateSize
		}
	}
	ratio := float32(int4Std / normalCodeStd())
	for i := range shards {
		ts := shards[i].tensors
		for j := range ts {
			t := &ts[j]
			if !strings.Contains(t.name, ".mlp.experts.") {
				continue
			}
			base, isScales := strings.CutSuffix(t.name, ".qs")
			c, ok := cols[base]
			if !ok {
				continue
			}
			if isScales {
				t.base *= ratio
			} else if t.fill == fillInt4 {
				t.fill, t.row = fillNormalInt4, int64((c+1)/2)
			}
		}
	}
}
