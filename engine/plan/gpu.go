package plan

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/internal/bytesize"
)

// GPU line items: what the GPU backend (kernels/gpu) allocates for
// prefill segments. The device lines live in device memory, which is the
// process's own memory on a device with unified memory (a Mac): there
// they are lines of the process plan. The staging line is always host
// memory of the process.
const (
	ItemGPUWeights = "GPU resident weights"
	ItemGPUBank    = "GPU expert bank"
	ItemGPUWork    = "GPU working buffers"
	ItemGPUStaging = "GPU staging"
	ItemGPUExperts = "GPU resident experts"
)

// GPU defaults.
const (
	// DefaultGPUScoreBytes bounds the attention scores (and gathered DSA
	// keys) of one block of a step's rows.
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
	// gpuDeviceShare is the share of a discrete device's memory the GPU
	// lines may take, in twentieths (the driver keeps some).
	gpuDeviceShare = 19
	// gpuGroupShare is the share of a layer's routed experts one copied
	// group holds (kernels/gpu groupShare): the bank holds two groups, one
	// computing while the next is copied in.
	gpuGroupShare = 8
	// gpuSlabBytes is a slab of resident experts (kernels/gpu
	// residentSlabBytes): the line is rounded down to whole slots of it.
	gpuSlabBytes int64 = 1 << 30
)

// GPUDevice is the GPU that prefill segments run on (Options.GPU): what its
// lines depend on.
type GPUDevice struct {
	// Unified says the device's memory is the process's (a Mac): every
	// GPU line is then a line of the process plan, and the expert bank
	// holds 2 x experts_per_tok experts, not a forward's worth.
	Unified bool
	// InPlace says resident weights are used where they lie in host
	// memory (unified memory with host import), not copied.
	InPlace bool
	// Memory is a discrete device's memory: the segment is chosen so that
	// the device lines fit 95% of it (0: not checked).
	Memory int64
	// ScoreBytes is the attention score block (DefaultGPUScoreBytes).
	ScoreBytes int64
}

// GPUPlan is the GPU backend's share of memory for the plan's prefill
// segment (Plan.GPU).
type GPUPlan struct {
	Items []Item `json:"items"`
	// DeviceBytes is the sum of the device lines; BankBytes the expert
	// bank's, which the backend is given as its bound, and
	// ResidentExpertBytes the resident experts' (discrete devices).
	DeviceBytes         int64 `json:"device_bytes"`
	BankBytes           int64 `json:"bank_bytes"`
	ResidentExpertBytes int64 `json:"resident_expert_bytes"`
	// HostBytes is the staging line.
	HostBytes int64 `json:"host_bytes"`
	// Unified says the lines are in the process plan.
	Unified bool `json:"unified"`
	// Fits says a discrete device holds the device lines; Problem says
	// why not.
	Fits    bool   `json:"fits"`
	Problem string `json:"problem,omitempty"`
}

// gpuItem reports whether the named line is a GPU line.
func gpuItem(name string) bool {
	switch name {
	case ItemGPUWeights, ItemGPUBank, ItemGPUWork, ItemGPUStaging, ItemGPUExperts:
		return true
	}
	return false
}

// gpuFixedItems are the GPU lines that do not grow with the segment, as
// lines of the process plan: on unified memory the resident weights and
// the bank; none on a discrete device, whose memory holds them.
func gpuFixedItems(cfg *config.Config, w Weights, dev *GPUDevice) []Item {
	if dev == nil || !dev.Unified {
		return nil
	}
	return []Item{gpuWeights(cfg, w, dev), gpuBank(cfg, w, dev, 1)}
}

// gpuBufferItems are the GPU lines of shape s that are process memory and
// grow with its rows and context: the staging, and on unified memory the
// working buffers.
func gpuBufferItems(s Shape) []Item {
	if s.GPU == nil {
		return nil
	}
	if s.GPU.Unified {
		return []Item{gpuWork(s), gpuStaging(s)}
	}
	return []Item{gpuStaging(s)}
}

// gpuPlan lays out every GPU line for shape s, whose weights are w.
func gpuPlan(cfg *config.Config, w Weights, s Shape) *GPUPlan {
	dev := s.GPU
	g := &GPUPlan{Items: []Item{gpuWeights(cfg, w, dev), gpuBank(cfg, w, dev, s.Rows), gpuWork(s), gpuStaging(s)}, Unified: dev.Unified, Fits: true}
	g.DeviceBytes = g.Items[0].Bytes + g.Items[1].Bytes + g.Items[2].Bytes
	g.BankBytes = g.Items[1].Bytes
	g.HostBytes = g.Items[3].Bytes
	if !dev.Unified && dev.Memory > 0 && g.DeviceBytes > dev.Memory/20*gpuDeviceShare {
		g.Fits = false
		g.Problem = fmt.Sprintf("the GPU lines need %s of device memory, more than 95%% of the device's %s", bytesize.IEC(g.DeviceBytes), bytesize.IEC(dev.Memory))
	}
	if g.Fits && !dev.Unified && dev.Memory > 0 {
		it := gpuResidentExperts(w, dev.Memory/20*gpuDeviceShare-g.DeviceBytes)
		g.Items = append(g.Items, it)
		g.ResidentExpertBytes = it.Bytes
		g.DeviceBytes += it.Bytes
	}
	return g
}

// gpuResidentExperts is the line of routed experts kept in a discrete
// device's memory between forwards: what the other lines leave of it, in
// whole slots of 1 GiB slabs, at most every routed expert.
func gpuResidentExperts(w Weights, free int64) Item {
	slot := max(w.MainExpertBytes(), w.MTPExpertBytes()) + 6*gpuAlign
	if free < slot || w.RoutedBytes == 0 {
		return Item{ItemGPUExperts, 0, "none: the other lines leave no room"}
	}
	perSlab := max(1, gpuSlabBytes/slot)
	slabs := free / (perSlab * slot)
	n := slabs * perSlab
	if rest := free - slabs*perSlab*slot; rest >= slot {
		n += rest / slot
	}
	all := w.RoutedBytes / max(w.MainExpertBytes(), 1)
	n = min(n, all+perSlab)
	return Item{ItemGPUExperts, n * slot, fmt.Sprintf("up to %d routed experts of %s kept in device memory between forwards, the most used first (what the other lines leave of 95%% of the device)", n, bytesize.IEC(slot))}
}

// gpuFitsDevice reports whether shape s's device lines fit a discrete
// device (always true on unified memory, where the process plan decides).
func gpuFitsDevice(cfg *config.Config, w Weights, s Shape) bool {
	return s.GPU == nil || gpuPlan(cfg, w, s).Fits
}

func gpuWeights(cfg *config.Config, w Weights, dev *GPUDevice) Item {
	if dev.InPlace {
		return Item{ItemGPUWeights, 0, "used in place: the device reads the mapped weights (unified memory, host import)"}
	}
	q4 := int4For(cfg, w)
	var bytes int64
	matrices := 0
	for l := 0; l < cfg.NumLayers; l++ {
		bytes += layerBytes(cfg, cfg.SparseLayer[l], q4)
		matrices += 8
	}
	what := fmt.Sprintf("%d layers", cfg.NumLayers)
	if w.MTP {
		bytes += layerBytes(cfg, true, int8Row)
		matrices += 8
		what += " and the MTP layer"
	}
	bytes += int64(matrices)*2*gpuAlign + gpuArenaBytes
	return Item{ItemGPUWeights, bytes, fmt.Sprintf("attention projections, dense and shared MLPs and routers of %s, copied once into device memory (in %s buffers)", what, bytesize.IEC(gpuArenaBytes))}
}

// gpuBank is the expert bank for forwards of rows rows.
func gpuBank(cfg *config.Config, w Weights, dev *GPUDevice, rows int) Item {
	E, k := cfg.NumRoutedExperts, cfg.ExpertsPerToken
	if E == 0 {
		return Item{ItemGPUBank, 0, "no routed experts"}
	}
	slot := max(w.MainExpertBytes(), w.MTPExpertBytes()) + 6*gpuAlign
	n := min(int64(E), int64(rows*k))
	detail := fmt.Sprintf("%d experts x %s: the routed experts of one layer's forward, copied in as they arrive", n, bytesize.IEC(slot))
	if dev.Unified {
		n = min(int64(E), int64(2*k))
		detail = fmt.Sprintf("%d experts x %s: a layer's routed experts copied in and applied in batches of 2 x experts_per_tok (memory shared with the host)", n, bytesize.IEC(slot))
	}
	if !dev.Unified {
		group := (n + gpuGroupShare - 1) / gpuGroupShare
		n = min(n, 2*group)
		detail = fmt.Sprintf("%d experts x %s: two groups of an eighth of a layer's routed experts for the forward, one applied while the next is copied in", n, bytesize.IEC(slot))
	}
	bank := n * slot
	if bank > gpuBindingLimit {
		fit := gpuBindingLimit / max(slot, 1)
		bank = fit * slot
		detail = fmt.Sprintf("%d experts x %s: a layer's routed experts in groups of what half a 4 GiB binding holds", fit, bytesize.IEC(slot))
	}
	return Item{ItemGPUBank, bank, detail}
}

// gpuWork is the scratch of the largest operation of a forward of shape
// s over s.Context cache entries: attention of a step's s.ScratchRows
// rows (queries, the cache, the visibility and DSA lists, absorbed
// queries, a score block and gathered keys, latents, heads, output), the
// dense MLP of a step, or the MoE layer of all s.Rows rows, with the half
// again the buffer grows by.
func gpuWork(s Shape) Item {
	cfg := s.Config
	score := orDefault(s.GPU.ScoreBytes, DefaultGPUScoreBytes)
	H, nh, E, k := int64(cfg.HiddenSize), int64(cfg.NumHeads), int64(cfg.NumRoutedExperts), int64(cfg.ExpertsPerToken)
	dn, dr, dv, rkv := int64(cfg.QKNopeHeadDim), int64(cfg.QKRopeHeadDim), int64(cfg.VHeadDim), int64(cfg.KVLoraRank)
	wd, dq := rkv+dr, dn+dr
	r, rs, t := int64(s.Rows), int64(s.ScratchRows), int64(s.Context)
	f := func(n int64) int64 { return 4 * n }
	inter := int64(cfg.MoEIntermediateSize)
	shared := inter * int64(cfg.NumSharedExperts)
	// The MoE layer of r rows: their inputs, router scores, routes,
	// outputs (the shared expert's first), the shared expert's
	// intermediates and the routed experts' sums; and one group of
	// experts' outputs and intermediates at a time, at most P (row, slot)
	// pairs (kernels/gpu's maxPairs), with two groups' gather tables (an
	// aligned lone entry each), row lists and accumulate lists.
	P := min(r*k, max(r, (r*k+gpuGroupShare-1)/gpuGroupShare))
	groups := 2*3*(4*min(E, r*k)+128) + 2*(2*P+3*P+1+P)
	moe := f(r*H) + f(r*E) + f(2*r*k) + f(r*H) + f(2*r*shared) + f(r*H) +
		f(P*H) + f(2*P*inter) + f(groups)
	attn := f(rs*nh*dq) + f(t*wd) + f(attentionVisFloats(s)) + f(rs*nh*wd) +
		min(score, f(rs*nh*t)) + gatheredKeyBytes(s, score) + f(rs*nh*rkv) + f(rs*nh*dv) + f(rs*H)
	dense := f(rs*H)*2 + f(2*rs*int64(cfg.IntermediateSize))
	work := max(moe, attn, dense) * 3 / 2
	return Item{ItemGPUWork, work, fmt.Sprintf("scratch of the largest operation of a %d-row forward over %d cache entries (attention of a %d-row step with %s score blocks%s; the MoE layer of every row; the dense MLP), with the half again it grows by",
		s.Rows, s.Context, s.ScratchRows, bytesize.IEC(score), dsaGPUNote(s))}
}

// attentionVisFloats is the visibility (a last key per row) and, with
// DSA, the selected keys of every row of a step.
func attentionVisFloats(s Shape) int64 {
	n := int64(s.ScratchRows)
	if selects(s) {
		n += int64(s.ScratchRows) * int64(s.Config.IndexTopK)
	}
	return n
}

// gatheredKeyBytes is the block of gathered DSA keys (within the score
// block's budget).
func gatheredKeyBytes(s Shape, score int64) int64 {
	if !selects(s) {
		return 0
	}
	c := s.Config
	return min(score, 4*int64(s.ScratchRows)*int64(c.IndexTopK)*int64(c.KVLoraRank+c.QKRopeHeadDim))
}

func dsaGPUNote(s Shape) string {
	if selects(s) {
		return fmt.Sprintf(", DSA rows scoring only their %d gathered keys", s.Config.IndexTopK)
	}
	return ""
}

// gpuStaging is the host-visible upload ring and the activations one
// operation sends and reads back (a step's attention, or the MoE layer's
// rows), with growth headroom.
func gpuStaging(s Shape) Item {
	cfg := s.Config
	H, nh := int64(cfg.HiddenSize), int64(cfg.NumHeads)
	dq, wd := int64(cfg.QKNopeHeadDim+cfg.QKRopeHeadDim), int64(cfg.KVLoraRank+cfg.QKRopeHeadDim)
	r, rs, t := int64(s.Rows), int64(s.ScratchRows), int64(s.Context)
	f := func(n int64) int64 { return 4 * n }
	in := max(f(r*H), f(rs*nh*dq)+f(t*wd)+f(attentionVisFloats(s)))
	out := max(f(r*H), f(rs*nh*dq))
	return Item{ItemGPUStaging, GPUStageRingBytes + (in+out)*3/2,
		fmt.Sprintf("host-visible upload ring (%s) and the activations one operation of a %d-row forward sends and reads back, with growth headroom", bytesize.IEC(GPUStageRingBytes), s.Rows)}
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
