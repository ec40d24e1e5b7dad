package speed_test

import (
	"fmt"

	"github.com/spoolhq/spool/engine/speed"
)

// GLM-5.2's geometry (75 decoder expert layers of 256 experts, 8 a token,
// 18.9 MB each; 78 layers of 64 attention heads of 256 + 256) with 9 cache
// slots a layer and 4,096-token prefill segments, on an Apple M4 Pro's
// published figures.
func ExamplePredict() {
	chip, err := speed.LookupChip("M4 Pro")
	if err != nil {
		panic(err)
	}
	p, err := speed.Predict(speed.Model{
		DenseBytes: 9_930_000_000, ExpertLayers: 75, ExpertsPerLayer: 256, ExpertsPerToken: 8,
		ExpertBytes: 18_915_328, CacheSlotsPerLayer: 9, PrefillSegment: 4096,
		AttentionFlopsPerKey: 2 * 78 * 64 * (256 + 256),
	}, chip.Machine())
	if err != nil {
		panic(err)
	}
	fmt.Printf("decode %.2f tok/s (%s-bound), prefill %.1f tok/s\n", p.DecodeTokensPerSecond, p.DecodeBound, p.PrefillTokensPerSecond)
	a := *p.AgentPrompt
	fmt.Printf("a %d-token agent prompt: %d segments, %.0f s (reads %.0f s, products on the %s %.0f s)\n", a.Tokens, a.Segments, a.Seconds, a.ReadSeconds, a.Device, a.ComputeSeconds)
	// Output:
	// decode 0.51 tok/s (disk-bound), prefill 8.5 tok/s
	// a 20000-token agent prompt: 5 segments, 322 s (reads 299 s, products on the GPU 296 s)
}
