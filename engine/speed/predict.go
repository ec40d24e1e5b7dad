package speed

import (
	"errors"
	"fmt"
	"math"

	"github.com/spoolhq/spool/engine/draftgate"
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
	// PrefillSegment is the prompt tokens one forward takes through the
	// model, layer by layer (the plan's): each routed expert a segment
	// routes to is read once for it. Context is the plan's tokens per
	// sequence (0: not known, no bound).
	PrefillSegment int
	Context        int
	// AttentionFlopsPerKey is what attention costs a token for each key
	// it attends to, over every decoder layer (scores and weighted values
	// of every head: 2 flops a multiply-add); SelectedKeys bounds the keys
	// a token attends to (DSA's index_topk; 0: every earlier one). 0
	// leaves attention out.
	AttentionFlopsPerKey float64
	SelectedKeys         int
	// MTPExpertBytes is one MTP-layer expert's bytes on disk and
	// MTPDenseBytes the MTP layer's resident weights a draft applies;
	// both 0 without an MTP layer (then no drafting is predicted).
	MTPExpertBytes, MTPDenseBytes int64
	// Drafting is what drafted decode is predicted under (nil:
	// DefaultAcceptance and an even routing's union).
	Drafting *Drafting
}

// Drafting is what a prediction of decode with MTP drafts assumes.
type Drafting struct {
	// Acceptance is the share of drafts accepted (0..1).
	Acceptance float64 `json:"acceptance"`
	// Union is the routed experts a verify forward's two positions read
	// in a layer, in one position's experts (1..2; 0 for 2 - k/E, what
	// routing that spreads evenly and independently gives); less where
	// consecutive positions share experts.
	Union float64 `json:"expert_union"`
}

// DefaultAcceptance is the drafts' acceptance a prediction assumes when
// none is given: a trained MTP layer's one-token drafts on chat and code
// (the demo model's, measured here, run from about half to nearly all).
// It is an assumption: the engine measures its own and decides.
const DefaultAcceptance = 0.8

// drafting is what m's drafted decode is predicted under.
func (m Model) drafting() Drafting {
	d := Drafting{Acceptance: DefaultAcceptance}
	if m.Drafting != nil {
		d = *m.Drafting
	}
	if d.Union == 0 {
		d.Union = 2 - float64(m.ExpertsPerToken)/float64(m.ExpertsPerLayer)
	}
	return d
}

// DraftPrediction is decode with MTP drafts, beside the plain one.
type DraftPrediction struct {
	Drafting
	DecodeTokensPerSecond   float64 `json:"decode_tokens_per_second"`
	DecodeReadBytesPerToken int64   `json:"decode_read_bytes_per_token"`
	DecodeBound             string  `json:"decode_bound"`
	// Choice is what the engine's gate would choose between drafting and
	// plain decode at these figures: "draft" or "plain".
	Choice string `json:"choice"`
}

// Machine is the figures a prediction runs on.
type Machine struct {
	// Name says where the figures come from.
	Name string `json:"name"`
	// DiskBytesPerSecond is whole-expert random reads at the read pool's
	// depth with the queue kept full (prefill's reads);
	// DiskBurstBytesPerSecond the same reads in a decoded token's bursts,
	// one layer's misses at a time, the queue draining between them
	// (decode's reads). ReadCPUSecondsPerByte is the CPU time the reads
	// take per byte (0 when the device moves the bytes) and Cores the
	// cores that time is spread over and the products run on: the
	// process's threads times the share of them it got while probed (on a
	// machine shared with other work, less than the threads).
	DiskBytesPerSecond      float64 `json:"disk_bytes_per_second"`
	DiskBurstBytesPerSecond float64 `json:"disk_burst_bytes_per_second"`
	ReadCPUSecondsPerByte   float64 `json:"read_cpu_seconds_per_byte,omitempty"`
	Cores                   float64 `json:"cores,omitempty"`
	// KernelBytesPerSecond is the expert weight bytes per second decode's
	// products apply (one row, every product on all threads);
	// MatMul8BytesPerSecond the weight bytes per second of the 8-token
	// product prefill uses on the CPU; GPUFlops the GPU float throughput
	// prefill uses instead when it is positive.
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
		DiskBytesPerSecond:      p.DiskBytesPerSecond,
		DiskBurstBytesPerSecond: p.DiskBurstBytesPerSecond,
		ReadCPUSecondsPerByte:   p.ReadCPUSecondsPerByte,
		Cores:                   p.Cores(),
		KernelBytesPerSecond:    p.KernelBytesPerSecond,
		MatMul8BytesPerSecond:   p.MatMul8BytesPerSecond,
		GPUFlops:                p.GPUFlops,
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
	// AgentPrompt is the prefill of a coding agent's first turn
	// (AgentPromptTokens, about Claude Code's) from nothing cached; nil
	// when the context cannot hold it.
	AgentPrompt *PromptTime `json:"agent_prompt,omitempty"`
	// Drafting is decode with MTP drafts (nil without an MTP layer); the
	// figures above are plain decode's.
	Drafting *DraftPrediction `json:"drafting,omitempty"`
	// Assumptions says in words what the figures rest on.
	Assumptions []string `json:"assumptions"`
}

// PromptTokens is the prompt length prefill speed is predicted for: a
// chat turn, cut to the plan's segment.
const PromptTokens = 512

// AgentPromptTokens is the length of a coding agent's first prompt (Claude
// Code's is about 20k tokens; every tool result adds thousands).
const AgentPromptTokens = 20_000

// PromptTime is the predicted prefill of one prompt from nothing cached:
// it goes through the model a segment at a time, each segment reading the
// routed experts it routes to once (those the cache misses) while its
// products run, and takes the longer of the two.
type PromptTime struct {
	Tokens   int `json:"tokens"`
	Segments int `json:"segments"`
	// ReadBytes and ReadSeconds are the routed experts read from the disk
	// over all segments; ComputeSeconds the products (dense weights,
	// routed experts, attention) on Device, "GPU" or "CPU".
	ReadBytes      int64   `json:"read_bytes"`
	ReadSeconds    float64 `json:"read_seconds"`
	ComputeSeconds float64 `json:"compute_seconds"`
	Device         string  `json:"device"`
	// Seconds is the prefill: per segment the longer of its reads and its
	// products, summed.
	Seconds float64 `json:"seconds"`
}

// cpuFlopsPerMatMul8Byte converts the 8-token product's rate of int4
// weight bytes into float operations: 2 weights a byte, 8 tokens, 2 flops a
// multiply-add. Attention's products on the CPU are taken at that rate.
const cpuFlopsPerMatMul8Byte = 2 * 8 * 2

// Predict predicts decode and prefill speed for model m on machine mc.
func Predict(m Model, mc Machine) (Prediction, error) {
	if err := m.validate(); err != nil {
		return Prediction{}, err
	}
	if !(mc.DiskBytesPerSecond > 0) || !(mc.DiskBurstBytesPerSecond > 0) || !(mc.KernelBytesPerSecond > 0) || !(mc.MatMul8BytesPerSecond > 0) || mc.GPUFlops < 0 {
		return Prediction{}, fmt.Errorf("speed: machine %q needs positive disk and kernel rates (have %g, %g, %g, %g)",
			mc.Name, mc.DiskBytesPerSecond, mc.DiskBurstBytesPerSecond, mc.KernelBytesPerSecond, mc.MatMul8BytesPerSecond)
	}
	if !(mc.ReadCPUSecondsPerByte >= 0) || math.IsInf(mc.ReadCPUSecondsPerByte, 0) || (mc.ReadCPUSecondsPerByte > 0 && !(mc.Cores > 0)) || math.IsInf(mc.Cores, 0) {
		return Prediction{}, fmt.Errorf("speed: machine %q has a bad read CPU cost (%g s/byte over %g cores)", mc.Name, mc.ReadCPUSecondsPerByte, mc.Cores)
	}
	E, k := float64(m.ExpertsPerLayer), float64(m.ExpertsPerToken)
	hit := math.Min(1, float64(m.CacheSlotsPerLayer)/E)
	// readCPU is the wall time the reads of n bytes take from the
	// products, their CPU time spread over the threads.
	readCPU := func(n float64) float64 {
		if mc.ReadCPUSecondsPerByte == 0 {
			return 0
		}
		return n * mc.ReadCPUSecondsPerByte / mc.Cores
	}

	// Decode runs two streams that overlap, and a token takes as long as
	// the slower one:
	//   - the disk's: per layer the k(1-hit) misses read at the burst
	//     rate (the queue fills and drains once a layer), then the last
	//     expert's product, which follows its read; and the rest of the
	//     token's work, during which the disk has nothing to read: the
	//     next layer's misses are not known until its attention and
	//     router have run (the dense weights: attention, dense and shared
	//     MLPs, routers, lm_head);
	//   - the cores': every expert and the dense weights applied at the
	//     kernel rate, plus the CPU time of the reads where the kernel
	//     copies the bytes (a memory-backed file system): that time is
	//     taken from the same cores.
	st := m.decodeStep(mc, hit, 1, 0, readCPU)
	missBytes, diskStream, coreStream, token, bound := st.miss, st.disk, st.cores, st.time, st.bound

	// Prefill of a chat turn: its tokens, up to a segment.
	B := min(PromptTokens, m.PrefillSegment)
	turn := predictPrompt(m, mc, B, hit, readCPU)
	touched := E * (1 - math.Pow(1-k/E, float64(B)))
	p := Prediction{
		Machine:                 mc.Name,
		DecodeTokensPerSecond:   1 / token,
		PrefillTokensPerSecond:  float64(B) / turn.Seconds,
		PrefillTokens:           B,
		ExpectedHitRate:         hit,
		DecodeReadBytesPerToken: int64(math.Round(missBytes)),
		DecodeBound:             bound,
	}
	gb := func(v float64) string { return fmt.Sprintf("%.2f GB/s", v/1e9) }
	p.Assumptions = []string{
		fmt.Sprintf("Routing spreads over the experts evenly, so %d cache slots of %d experts per layer hit %.1f%% of a token's %d experts per layer; a trained model's routing repeats experts more, so this is the cautious side.",
			m.CacheSlotsPerLayer, m.ExpertsPerLayer, 100*hit, m.ExpertsPerToken),
		decodeWords(bound, missBytes, mc, diskStream, coreStream, readCPU(missBytes)),
		fmt.Sprintf("The %.2f GB of dense weights (attention, dense and shared MLPs, routers, lm_head) are applied once a token at the experts' kernel rate; attention over a long context, sampling and the OS are not counted.", float64(m.DenseBytes)/1e9),
	}
	if m.MTPExpertBytes > 0 {
		d := m.drafting()
		// A step drafts with the MTP layer, which absorbs one position (the
		// previous draft missed) or two (it was accepted), then verifies
		// the token and the draft in one forward, emitting 1 + a tokens.
		ds := m.decodeStep(mc, hit, d.Union, 1+d.Acceptance*(d.Union-1), readCPU)
		perToken := 1 + d.Acceptance
		dp := &DraftPrediction{
			Drafting:                d,
			DecodeTokensPerSecond:   perToken / ds.time,
			DecodeReadBytesPerToken: int64(math.Round(ds.miss / perToken)),
			DecodeBound:             ds.bound,
			Choice:                  draftgate.Plain.String(),
		}
		if draftgate.Compare(draftgate.PerToken{Seconds: ds.time / perToken, Bytes: ds.miss / perToken}, draftgate.PerToken{Seconds: token, Bytes: missBytes}) < 1 {
			dp.Choice = draftgate.Draft.String()
		}
		p.Drafting = dp
		p.Assumptions = append(p.Assumptions, draftWords(m, d, dp, p))
	} else {
		p.Assumptions = append(p.Assumptions, "The model has no MTP layer, so decode drafts nothing.")
	}
	p.Assumptions = append(p.Assumptions, mc.Notes...)
	if mc.GPUFlops > 0 {
		p.Assumptions = append(p.Assumptions, fmt.Sprintf("Prefill of a %d-token prompt touches %.0f experts a layer, read once each, with the products on the GPU at %.1f TFLOP/s.", B, touched, mc.GPUFlops/1e12))
	} else {
		p.Assumptions = append(p.Assumptions, fmt.Sprintf("Prefill of a %d-token prompt touches %.0f experts a layer, read once each, with the products on the CPU at %s of weights per 8 tokens.", B, touched, gb(mc.MatMul8BytesPerSecond)))
	}
	if m.Context == 0 || m.Context >= AgentPromptTokens {
		a := predictPrompt(m, mc, AgentPromptTokens, hit, readCPU)
		p.AgentPrompt = &a
		p.Assumptions = append(p.Assumptions, agentWords(m, mc, a))
	} else {
		p.Assumptions = append(p.Assumptions, fmt.Sprintf("A %d-token agent prompt does not fit the %d-token context: raise the context to predict it.", AgentPromptTokens, m.Context))
	}
	return p, nil
}

// predictPrompt predicts the prefill of a prompt of tokens tokens, cut
// into the plan's segments, with hit of each layer's experts cached: per
// segment, its touched experts read at the disk's rate (the queue kept
// full) beside its products, the longer of the two.
func predictPrompt(m Model, mc Machine, tokens int, hit float64, readCPU func(float64) float64) PromptTime {
	L, E, k := float64(m.ExpertLayers), float64(m.ExpertsPerLayer), float64(m.ExpertsPerToken)
	eb := float64(m.ExpertBytes)
	pt := PromptTime{Tokens: tokens, Device: "CPU"}
	if mc.GPUFlops > 0 {
		pt.Device = "GPU"
	}
	passes := func(rows float64) float64 { return math.Ceil(rows / 8) }
	for from := 0; from < tokens; from += m.PrefillSegment {
		s := min(m.PrefillSegment, tokens-from)
		S := float64(s)
		touched := E * (1 - math.Pow(1-k/E, S))
		bytes := L * touched * (1 - hit) * eb
		read := bytes / mc.DiskBytesPerSecond
		attention := m.AttentionFlopsPerKey * attendedKeys(from, s, m.SelectedKeys)
		var compute float64
		if mc.GPUFlops > 0 {
			// int4 weights: 2 weights a byte, 2 flops a weight and token.
			weights := 2 * (float64(m.DenseBytes) + L*k*eb)
			compute = (2*weights*S + attention) / mc.GPUFlops
		} else {
			compute = (float64(m.DenseBytes)*passes(S)+L*touched*eb*passes(S*k/touched))/mc.MatMul8BytesPerSecond +
				attention/(cpuFlopsPerMatMul8Byte*mc.MatMul8BytesPerSecond)
		}
		compute += readCPU(bytes)
		pt.Segments++
		pt.ReadBytes += int64(math.Round(bytes))
		pt.ReadSeconds += read
		pt.ComputeSeconds += compute
		pt.Seconds += math.Max(read, compute)
	}
	return pt
}

// attendedKeys is the keys tokens [from, from+n) attend to in all: each
// every earlier one and itself, at most selected (0: no bound).
func attendedKeys(from, n, selected int) float64 {
	sum := func(t int) float64 { return float64(t) * float64(t+1) / 2 } // keys of tokens 0..t-1
	if selected <= 0 {
		return sum(from+n) - sum(from)
	}
	var keys float64
	if lo, hi := from, min(from+n, selected); hi > lo {
		keys += sum(hi) - sum(lo)
	}
	if rest := from + n - max(from, selected); rest > 0 {
		keys += float64(rest) * float64(selected)
	}
	return keys
}

// agentWords says what the agent prompt's figure rests on.
func agentWords(m Model, mc Machine, pt PromptTime) string {
	w := fmt.Sprintf("A %d-token agent prompt goes through the model in %d segment(s) of up to %d tokens, each reading the routed experts it reaches once: %.0f GB at %.2f GB/s, %.0f s; its products on the %s take %.0f s",
		pt.Tokens, pt.Segments, m.PrefillSegment, float64(pt.ReadBytes)/1e9, mc.DiskBytesPerSecond/1e9, pt.ReadSeconds, pt.Device, pt.ComputeSeconds)
	if m.AttentionFlopsPerKey > 0 {
		if m.SelectedKeys > 0 {
			w += fmt.Sprintf(", attention over at most %d keys a token included", m.SelectedKeys)
		} else {
			w += ", attention over every earlier key included (it grows with the square of the prompt)"
		}
	}
	return w + fmt.Sprintf("; reads and products overlap, so about %s in all.", minutes(pt.Seconds))
}

// minutes says a duration in seconds or minutes.
func minutes(s float64) string {
	if s < 120 {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%.1f min", s/60)
}

// step is one decode step's figures: the bytes its misses read, the
// disk's and the cores' streams, the longer of the two and which it is.
type step struct {
	miss, disk, cores, time float64
	bound                   string
}

// decodeStep is a decode step whose forward reads union times a token's
// experts in every layer (1 for a plain step, two positions' union for a
// verify) and, when mtpUnion is positive, whose MTP layer first reads
// mtpUnion times a token's experts of its own (cached as every layer's
// are: the plan gives each expert layer, the MTP layer's included, the
// same cache slots) and applies its dense weights. A product over two rows
// takes what one row's does: decode's products are bound by reading their
// weights.
func (m Model) decodeStep(mc Machine, hit, union, mtpUnion float64, readCPU func(float64) float64) step {
	L, k := float64(m.ExpertLayers), float64(m.ExpertsPerToken)
	eb, mb := float64(m.ExpertBytes), float64(m.MTPExpertBytes)
	kr := mc.KernelBytesPerSecond
	miss := L * k * union * (1 - hit) * eb
	applied := L * k * union * eb
	lastProducts := L * eb
	dense := float64(m.DenseBytes)
	if mtpUnion > 0 {
		miss += k * mtpUnion * (1 - hit) * mb
		applied += k * mtpUnion * mb
		lastProducts += mb
		dense += float64(m.MTPDenseBytes)
	}
	disk := miss/mc.DiskBurstBytesPerSecond + lastProducts/kr + dense/kr
	if miss == 0 {
		disk = 0
	}
	cores := applied/kr + dense/kr + readCPU(miss)
	s := step{miss: miss, disk: disk, cores: cores, time: cores, bound: "compute"}
	if disk > cores {
		s.time, s.bound = disk, "disk"
	}
	return s
}

// draftWords says what the drafting figure assumed and which mode the
// gate would choose.
func draftWords(m Model, d Drafting, dp *DraftPrediction, p Prediction) string {
	return fmt.Sprintf("With MTP drafts accepted %.0f%% of the time (assumed) and a verify forward's two positions reading %.2fx a token's experts in each layer (assumed: %.2f is routing spread evenly), plus the MTP layer's %d experts of %.1f MB a draft (cached as every layer's are) and its %.2f GB of dense weights: %.2f tok/s reading %.0f MB a token, against %.2f tok/s and %.0f MB without drafts. The engine's gate would choose %s; it measures both as it decodes and drafts only while drafting is cheaper.",
		100*d.Acceptance, d.Union, 2-float64(m.ExpertsPerToken)/float64(m.ExpertsPerLayer), m.ExpertsPerToken, float64(m.MTPExpertBytes)/1e6, float64(m.MTPDenseBytes)/1e9,
		dp.DecodeTokensPerSecond, float64(dp.DecodeReadBytesPerToken)/1e6, p.DecodeTokensPerSecond, float64(p.DecodeReadBytesPerToken)/1e6, dp.Choice)
}

// decodeWords says how the decode figure came about.
func decodeWords(bound string, missBytes float64, mc Machine, disk, cores, readCPU float64) string {
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", 1e3*s) }
	w := fmt.Sprintf("Decode is %s-bound. Reads and products overlap, so a token takes the longer of two streams. The disk's: %.0f MB of misses a token read one layer's at a time at %.2f GB/s (bursts that start and drain the read queue, as a token's layers do), then idle while the last expert's product and the next layer's attention and router run: %s. The cores': every routed expert and the dense weights applied at %.2f GB/s",
		bound, missBytes/1e6, mc.DiskBurstBytesPerSecond/1e9, ms(disk), mc.KernelBytesPerSecond/1e9)
	if readCPU > 0 {
		w += fmt.Sprintf(", plus %s of CPU time the reads take from them (the kernel's work per byte read, as probed: a copy of every byte where the file system has no direct I/O, far less where it has)", ms(readCPU))
	}
	return w + ": " + ms(cores) + "."
}

func (m Model) validate() error {
	switch {
	case m.ExpertLayers <= 0 || m.ExpertsPerLayer <= 0 || m.ExpertBytes <= 0:
		return errors.New("speed: the model has no routed experts to stream")
	case m.ExpertsPerToken <= 0 || m.ExpertsPerToken > m.ExpertsPerLayer:
		return fmt.Errorf("speed: %d experts per token of %d per layer", m.ExpertsPerToken, m.ExpertsPerLayer)
	case m.DenseBytes < 0 || m.CacheSlotsPerLayer < 0 || m.PrefillSegment <= 0 || m.Context < 0 || !(m.AttentionFlopsPerKey >= 0) || m.SelectedKeys < 0:
		return fmt.Errorf("speed: bad plan figures (dense %d bytes, %d cache slots, segment %d, attention %g flops a key over %d keys)", m.DenseBytes, m.CacheSlotsPerLayer, m.PrefillSegment, m.AttentionFlopsPerKey, m.SelectedKeys)
	case m.MTPExpertBytes < 0 || m.MTPDenseBytes < 0:
		return fmt.Errorf("speed: bad MTP layer figures (%d bytes an expert, %d dense)", m.MTPExpertBytes, m.MTPDenseBytes)
	case m.Drafting != nil && !(m.Drafting.Acceptance >= 0 && m.Drafting.Acceptance <= 1):
		return fmt.Errorf("speed: a draft acceptance of %g is outside 0..1", m.Drafting.Acceptance)
	case m.Drafting != nil && m.Drafting.Union != 0 && !(m.Drafting.Union >= 1 && m.Drafting.Union <= 2):
		return fmt.Errorf("speed: an expert union of %g is outside 1..2 (two positions read at least one's experts and at most twice theirs)", m.Drafting.Union)
	}
	return nil
}
