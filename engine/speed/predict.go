package speed

import (
	"errors"
	"fmt"
	"math"
)

// Model is what the prediction needs to know about a model and its plan.
type Model struct {
	// DenseBytes is the resident weight bytes one decoded token applies
	// (everything resident but the embedding table, of which a token reads
	// one row).
	DenseBytes int64
	// ExpertLayers is the decoder layers with routed experts (the MTP
	// layer not counted), ExpertsPerLayer the routed experts of each,
	// ExpertsPerToken those a token routes to in each layer, ExpertBytes
	// the bytes of one expert on disk.
	ExpertLayers, ExpertsPerLayer, ExpertsPerToken int
	ExpertBytes                                    int64
	// CacheSlotsPerLayer is the plan's expert cache (LRU and pinned
	// slots) per layer.
	CacheSlotsPerLayer int
	// PrefillChunk is the prompt tokens one forward takes (the plan's).
	PrefillChunk int
}

// Machine is the figures a prediction runs on.
type Machine struct {
	// Name says where the figures come from.
	Name string `json:"name"`
	// DiskBytesPerSecond is whole-expert random reads at the read pool's
	// depth; KernelBytesPerSecond the weight bytes per second the decode
	// product applies; MatMul8BytesPerSecond the weight bytes per second
	// of the 8-token product prefill uses on the CPU; GPUFlops the GPU
	// float throughput prefill uses instead when it is positive.
	DiskBytesPerSecond    float64 `json:"disk_bytes_per_second"`
	KernelBytesPerSecond  float64 `json:"kernel_bytes_per_second"`
	MatMul8BytesPerSecond float64 `json:"matmul8_bytes_per_second"`
	GPUFlops              float64 `json:"gpu_flops,omitempty"`
	// Notes are assumptions behind the figures themselves.
	Notes []string `json:"notes,omitempty"`
}

// FromProbes is the machine the probes measured.
func FromProbes(p Probes) Machine {
	return Machine{
		Name: fmt.Sprintf("this machine (%s, %d threads; probed %s from %s)",
			p.Machine, p.Threads, p.MeasuredAt.UTC().Format("2006-01-02 15:04 MST"), p.DiskPath),
		DiskBytesPerSecond:    p.DiskBytesPerSecond,
		KernelBytesPerSecond:  p.KernelBytesPerSecond,
		MatMul8BytesPerSecond: p.MatMul8BytesPerSecond,
		GPUFlops:              p.GPUFlops,
	}
}

// Prediction is the speed a user should expect.
type Prediction struct {
	Machine                 string  `json:"machine"`
	DecodeTokensPerSecond   float64 `json:"decode_tokens_per_second"`
	PrefillTokensPerSecond  float64 `json:"prefill_tokens_per_second"`
	PrefillTokens           int     `json:"prefill_tokens"`
	ExpectedHitRate         float64 `json:"expected_hit_rate"`
	DecodeReadBytesPerToken int64   `json:"decode_read_bytes_per_token"`
	// DecodeBound is "disk" when reading the misses takes longer than
	// applying the experts, else "compute".
	DecodeBound string `json:"decode_bound"`
	// Assumptions says in words what the figures rest on.
	Assumptions []string `json:"assumptions"`
}

// PromptTokens is the prompt length prefill speed is predicted for: a
// coding agent's turn, cut to the plan's chunk.
const PromptTokens = 512

// Predict predicts decode and prefill speed for model m on machine mc.
func Predict(m Model, mc Machine) (Prediction, error) {
	if err := m.validate(); err != nil {
		return Prediction{}, err
	}
	if !(mc.DiskBytesPerSecond > 0) || !(mc.KernelBytesPerSecond > 0) || !(mc.MatMul8BytesPerSecond > 0) || mc.GPUFlops < 0 {
		return Prediction{}, fmt.Errorf("speed: machine %q needs positive disk and kernel rates (have %g, %g, %g)",
			mc.Name, mc.DiskBytesPerSecond, mc.KernelBytesPerSecond, mc.MatMul8BytesPerSecond)
	}
	L, E, k := float64(m.ExpertLayers), float64(m.ExpertsPerLayer), float64(m.ExpertsPerToken)
	eb := float64(m.ExpertBytes)
	hit := math.Min(1, float64(m.CacheSlotsPerLayer)/E)

	// Decode: per layer the k(1-hit) misses stream from the disk while the
	// experts that landed are applied; the layer ends when the last
	// expert's product does, which follows its read when the disk is the
	// slower stream.
	read := k * (1 - hit) * eb / mc.DiskBytesPerSecond
	apply := k * eb / mc.KernelBytesPerSecond
	one := eb / mc.KernelBytesPerSecond
	layer, bound := apply, "compute"
	if read > 0 && read+one > apply {
		layer, bound = read+one, "disk"
	}
	token := float64(m.DenseBytes)/mc.KernelBytesPerSecond + L*layer

	// Prefill: a chunk of B tokens touches, under routing spread evenly,
	// E(1-(1-k/E)^B) experts of a layer; each is read once (unless cached)
	// and applied to its rows 8 at a time, while the dense weights are
	// applied to the B rows 8 at a time. Reads and products overlap.
	B := float64(min(PromptTokens, m.PrefillChunk))
	touched := E * (1 - math.Pow(1-k/E, B))
	rowsPerExpert := B * k / touched
	prefillRead := L * touched * (1 - hit) * eb / mc.DiskBytesPerSecond
	var prefillCompute float64
	if mc.GPUFlops > 0 {
		// int4 weights: 2 weights a byte, 2 flops a weight and token.
		weights := 2 * (float64(m.DenseBytes) + L*k*eb)
		prefillCompute = 2 * weights * B / mc.GPUFlops
	} else {
		passes := func(rows float64) float64 { return math.Ceil(rows / 8) }
		prefillCompute = (float64(m.DenseBytes)*passes(B) + L*touched*eb*passes(rowsPerExpert)) / mc.MatMul8BytesPerSecond
	}
	prefill := math.Max(prefillRead, prefillCompute)

	p := Prediction{
		Machine:                 mc.Name,
		DecodeTokensPerSecond:   1 / token,
		PrefillTokensPerSecond:  B / prefill,
		PrefillTokens:           int(B),
		ExpectedHitRate:         hit,
		DecodeReadBytesPerToken: int64(math.Round(L * k * (1 - hit) * eb)),
		DecodeBound:             bound,
	}
	gb := func(v float64) string { return fmt.Sprintf("%.2f GB/s", v/1e9) }
	p.Assumptions = []string{
		fmt.Sprintf("Routing spreads over the experts evenly, so %d cache slots of %d experts per layer hit %.1f%% of a token's %d experts per layer; a trained model's routing repeats experts more, so this is the cautious side.",
			m.CacheSlotsPerLayer, m.ExpertsPerLayer, 100*hit, m.ExpertsPerToken),
		fmt.Sprintf("Misses are read at %s (random whole-expert reads at the read pool's depth) while experts that have landed are applied at %s; decode is %s-bound: %.0f MB read a token over %d layers.",
			gb(mc.DiskBytesPerSecond), gb(mc.KernelBytesPerSecond), bound, float64(p.DecodeReadBytesPerToken)/1e6, m.ExpertLayers),
		fmt.Sprintf("The %.2f GB of dense weights are applied once a token; attention over a short context, sampling and the OS are not counted.", float64(m.DenseBytes)/1e9),
		"Speculative decoding (the MTP layer) is not counted: accepted drafts raise decode speed above this.",
	}
	p.Assumptions = append(p.Assumptions, mc.Notes...)
	if mc.GPUFlops > 0 {
		p.Assumptions = append(p.Assumptions, fmt.Sprintf("Prefill of a %d-token prompt touches %.0f experts a layer, read once each, with the products on the GPU at %.1f TFLOP/s.", int(B), touched, mc.GPUFlops/1e12))
	} else {
		p.Assumptions = append(p.Assumptions, fmt.Sprintf("Prefill of a %d-token prompt touches %.0f experts a layer, read once each, with the products on the CPU at %s of weights per 8 tokens.", int(B), touched, gb(mc.MatMul8BytesPerSecond)))
	}
	return p, nil
}

func (m Model) validate() error {
	switch {
	case m.ExpertLayers <= 0 || m.ExpertsPerLayer <= 0 || m.ExpertBytes <= 0:
		return errors.New("speed: the model has no routed experts to stream")
	case m.ExpertsPerToken <= 0 || m.ExpertsPerToken > m.ExpertsPerLayer:
		return fmt.Errorf("speed: %d experts per token of %d per layer", m.ExpertsPerToken, m.ExpertsPerLayer)
	case m.DenseBytes < 0 || m.CacheSlotsPerLayer < 0 || m.PrefillChunk <= 0:
		return fmt.Errorf("speed: bad plan figures (dense %d bytes, %d cache slots, chunk %d)", m.DenseBytes, m.CacheSlotsPerLayer, m.PrefillChunk)
	}
	return nil
}
