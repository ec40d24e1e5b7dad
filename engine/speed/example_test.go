package speed_test

import (
	"fmt"

	"github.com/spoolhq/spool/engine/speed"
)

// GLM-5.2's geometry (75 decoder expert layers of 256 experts, 8 a token,
// 18.9 MB each) with 9 cache slots a layer, as 32 GB plans it, on an
// Apple M4 Pro's published figures.
func ExamplePredict() {
	chip, err := speed.LookupChip("M4 Pro")
	if err != nil {
		panic(err)
	}
	p, err := speed.Predict(speed.Model{
		DenseBytes: 9_930_000_000, ExpertLayers: 75, ExpertsPerLayer: 256, ExpertsPerToken: 8,
		ExpertBytes: 18_915_328, CacheSlotsPerLayer: 9, PrefillChunk: 4096,
	}, chip.Machine())
	if err != nil {
		panic(err)
	}
	fmt.Printf("decode %.2f tok/s (%s-bound), prefill %.1f tok/s\n", p.DecodeTokensPerSecond, p.DecodeBound, p.PrefillTokensPerSecond)
	// Output: decode 0.51 tok/s (disk-bound), prefill 8.5 tok/s
}
