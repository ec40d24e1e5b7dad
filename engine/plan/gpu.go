package plan

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
)

// GPU line items: what the GPU backend (kernels/gpu) allocates. The device
// lines live in device memory, which is the process's own memory on a
// device with unified memory (a Mac); the staging line is always host
// memory of the process.
const (
	ItemGPUWeights = "GPU resident weights"
	ItemGPUBank    = "GPU expert bank"
	ItemGPUWork    = "GPU working buffers"
	ItemGPUStaging = "GPU staging"
)

// GPU defaults.
const (
	// DefaultGPUScoreBytes bounds the attention score block of a chunk.
	DefaultGPUScoreBytes int64 = 256 << 20
	// GPUStageRingBytes is the backend's upload ring (two halves).
	GPUStageRingBytes int64 = 64 << 20
	// gpuBindingLimit caps one binding (and so the expert bank) at the
	// 32-bit offsets the shaders use.
	gpuBindingLimit int64 = 1<<32 - 1
	// gpuAlign is the padding of each matrix in device memory.
	gpuAlign int64 = 256
	// gpuArenaBytes is the device buffer resident weights are allocated
	// from (kernels/gpu arenaBytes): the last one is partly used.
	gpuArenaBytes int64 = 256 << 20
)

// GPUOptions shape the GPU backend of a run.
type GPUOptions struct {
	// BatchRows is the most rows one forward carries (DefaultBatchRows).
	BatchRows int
	// Context is the most cache entries one attention call reads
	// (DefaultContext).
	Context int
	// Unified says the device's memory is the process's (a Mac): the
	// expert bank then holds 2 x experts_per_tok experts, not a layer's
	// worth, and the device lines belong in the process plan (Options.Extra).
	Unified bool
	// InPlace says resident weights are used where they lie in host
	// memory (unified memory with host import), not copied.
	InPlace bool
	// ScoreBytes is the attention score block (DefaultGPUScoreBytes).
	ScoreBytes int64
}

// GPUPlan is the GPU backend's share of memory.
type GPUPlan struct {
	Items []Item `json:"items"`
	// DeviceBytes is the sum of the device lines; BankBytes the expert
	// bank's, which the backend is given as its bound.
	DeviceBytes int64 `json:"device_bytes"`
	BankBytes   int64 `json:"bank_bytes"`
	// HostBytes is the staging line.
	HostBytes int64 `json:"host_bytes"`
}

// GPU lays out the memory the GPU backend needs to run forwards of
// o.BatchRows rows of the model of cfg, whose weights are w.
func GPU(cfg *config.Config, w Weights, o GPUOptions) GPUPlan {
	R := orDefault(o.BatchRows, DefaultBatchRows)
	T := orDefault(o.Context, DefaultContext)
	score := orDefault(o.ScoreBytes, DefaultGPUScoreBytes)
	H, nh, E, k := cfg.HiddenSize, cfg.NumHeads, cfg.NumRoutedExperts, cfg.ExpertsPerToken
	dn, dr, dv, rkv := cfg.QKNopeHeadDim, cfg.QKRopeHeadDim, cfg.VHeadDim, cfg.KVLoraRank
	wd, dq := int64(rkv+dr), int64(dn+dr)
	q4 := int4For(cfg, w)

	var weights int64
	matrices := 0
	for l := 0; l < cfg.NumLayers; l++ {
		weights += layerBytes(cfg, cfg.SparseLayer[l], q4)
		matrices += 8
	}
	weights += int64(matrices)*2*gpuAlign + gpuArenaBytes
	weightDetail := fmt.Sprintf("attention projections, dense and shared MLPs and routers of %d layers, copied once into device memory (in %s buffers)", cfg.NumLayers, sizeText(gpuArenaBytes))
	if o.InPlace {
		weights = 0
		weightDetail = "used in place: the device reads the mapped weights (unified memory, host import)"
	}

	slot := w.MainExpertBytes() + 6*gpuAlign
	bankExperts := min(int64(E), int64(R*k))
	bankDetail := fmt.Sprintf("%d experts x %s: the routed experts of one layer's chunk, copied in as they arrive", bankExperts, sizeText(slot))
	if o.Unified {
		bankExperts = min(bankExperts, int64(2*k))
		bankDetail = fmt.Sprintf("%d experts x %s: a layer's routed experts copied in and applied in batches of 2 x experts_per_tok (memory shared with the host)", bankExperts, sizeText(slot))
	}
	bank := bankExperts * slot
	if bank > gpuBindingLimit {
		fit := gpuBindingLimit / max(slot, 1)
		bank = fit * slot
		bankDetail = fmt.Sprintf("%d experts x %s: a layer's routed experts in batches of what one 4 GiB binding holds", fit, sizeText(slot))
	}
	if E == 0 {
		bank, bankDetail = 0, "no routed experts"
	}

	f := func(n int64) int64 { return 4 * n }
	r, t := int64(R), int64(T)
	inter := int64(cfg.MoEIntermediateSize)
	shared := inter * int64(cfg.NumSharedExperts)
	moe := f(r*int64(H)) + f(r*int64(E)) + f(2*r*int64(k)) + f(r*int64(H)) + f(2*r*shared) +
		f(r*int64(k)*int64(H)) + f(2*r*int64(k)*inter) + f(3*4*min(int64(E), r*int64(k))) + f(4*r*int64(k))
	attn := f(r*int64(nh)*dq) + f(t*wd) + f(r*int64(max(1, (T+31)/32))) + f(r*int64(nh)*wd) +
		min(score, f(r*int64(nh)*t)) + f(r*int64(nh)*int64(rkv)) + f(r*int64(nh)*int64(dv)) + f(r*int64(H))
	dense := f(r*int64(H))*2 + f(2*r*int64(cfg.IntermediateSize))
	work := max(moe, attn, dense) * 3 / 2
	workDetail := fmt.Sprintf("scratch of the largest operation on a %d-row chunk over %d cache entries (attention, score block %s; the MoE layer; the dense MLP), with the half again it grows by", R, T, sizeText(score))

	in := max(f(r*int64(H)), f(r*int64(nh)*dq)+f(t*wd)+f(r*int64(max(1, (T+31)/32))))
	out := max(f(r*int64(H)), f(r*int64(nh)*dq))
	staging := GPUStageRingBytes + (in+out)*3/2
	stagingDetail := fmt.Sprintf("host-visible upload ring (%s) and the activations one operation sends and reads back, with growth headroom", sizeText(GPUStageRingBytes))

	g := GPUPlan{
		Items: []Item{
			{ItemGPUWeights, weights, weightDetail},
			{ItemGPUBank, bank, bankDetail},
			{ItemGPUWork, work, workDetail},
			{ItemGPUStaging, staging, stagingDetail},
		},
		DeviceBytes: weights + bank + work,
		BankBytes:   bank,
		HostBytes:   staging,
	}
	return g
}

// int4For guesses the int4 layout of w's resident matrices from its
// routed experts (the artifact quantizes both the same way): grouped by 64
// when the experts' size says so, else per row.
func int4For(cfg *config.Config, w Weights) matrixBytes {
	I, H := cfg.MoEIntermediateSize, cfg.HiddenSize
	g64 := int4Group(64)
	if e := w.MainExpertBytes(); e > 0 && e == 2*g64(I, H)+g64(H, I) {
		return g64
	}
	return int4Row
}
