package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels/gpu"
)

// PrefillOptions are the settings of Prefill (spool bench prefill's flags).
type PrefillOptions struct {
	// Memory sizes the plan (the budget, the expert cache).
	Memory host.Memory
	// Tokens is the prompt's length; Context the context planned (more
	// than Tokens).
	Tokens, Context int
	// CacheSlots, when positive, sizes the expert cache in slots per
	// expert layer instead of Memory.ExpertCache.
	CacheSlots int
	// Stream streams experts from disk even when the plan could keep them
	// all; AllKeys adds the leg with every key computed on DSA layers.
	Stream, AllKeys bool
	// CompareChunk, when positive, adds the chunked leg: the same prompt
	// forwarded in chunks of that many rows (each chunk reading the
	// routed experts it needs, as prefill did before segments), in the
	// same engine with the same plan and expert cache.
	CompareChunk int
	// GPU is the GPU leg's mode (host.GPUAuto, GPUOn, GPUOff); GPUOnly
	// runs that leg alone.
	GPU     string
	GPUOnly bool
	// CopyExperts makes the GPU leg copy routed experts into its bank even
	// where the device could use them in place (unified memory): to
	// measure the copies.
	CopyExperts bool
	// Warm is "" (cold runs), "all" (every leg prefills once, untimed,
	// first) or "gpu" (the GPU leg only).
	Warm string
	// Repeat is the runs of each leg (alternated; the fastest counts).
	Repeat int
	// Seed seeds the prompt ids.
	Seed uint64
	// CPUProfile, when set, is where the first timed run of the GPU leg
	// (of the CPU leg without one) writes a CPU profile.
	CPUProfile string
}

// PrefillResult is the result of spool bench prefill.
type PrefillResult struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	Context      int    `json:"context"`
	// SegmentRows is the prompt rows one forward carries, layer by layer
	// (the plan's prefill segment; every leg but the chunked one);
	// ScratchRows the rows a layer's steps work on at once.
	SegmentRows int  `json:"segment_rows"`
	ScratchRows int  `json:"scratch_rows"`
	DSA         bool `json:"dsa"`
	// Threads is the CPU worker goroutines (GOMAXPROCS).
	Threads int `json:"threads"`
	// Warm says each leg prefilled the prompt once, untimed, before its
	// timed run (--warm): the expert cache holds what the prompt routes to
	// (as far as it can) and the GPU's pipelines are built. WarmGPUOnly says
	// only the GPU leg did (--warm=gpu).
	Warm        bool `json:"warm"`
	WarmGPUOnly bool `json:"warm_gpu_only,omitempty"`

	Streamed           bool  `json:"streamed"`
	DirectIO           bool  `json:"direct_io"`
	CacheSlotsPerLayer int   `json:"cache_slots_per_layer"`
	ExpertLayers       int   `json:"expert_layers"`
	ExpertsPerLayer    int   `json:"experts_per_layer"`
	RoutedBytes        int64 `json:"routed_bytes"`

	// Prefill is the measured prefill: sparse DSA attention where the model
	// has it. AllKeys, with --compare-all-keys, is the same prefill with
	// every key computed and the DSA selection applied as a mask.
	Prefill PrefillLeg  `json:"prefill"`
	AllKeys *PrefillLeg `json:"all_keys,omitempty"`
	// DSASpeedup is AllKeys seconds over Prefill seconds (best of each).
	DSASpeedup float64 `json:"dsa_speedup,omitempty"`
	// SameFirstToken says both legs sampled the same first token.
	SameFirstToken *bool `json:"same_first_token,omitempty"`

	// Chunked, with --compare-chunk, is the same prefill in chunks of
	// ChunkRows rows; SegmentSpeedup is its seconds over Prefill's (best
	// of each), ChunkedSameFirstToken whether both sampled the same
	// first token.
	Chunked               *PrefillLeg `json:"chunked,omitempty"`
	ChunkRows             int         `json:"chunk_rows,omitempty"`
	SegmentSpeedup        float64     `json:"segment_speedup,omitempty"`
	ChunkedSameFirstToken *bool       `json:"chunked_same_first_token,omitempty"`

	// GPUPrefill is the same prefill with the segments' heavy steps on the
	// GPU (--gpu; decode and the CPU leg stay as they are), GPU the device,
	// its plan lines or why it was not used, and GPUSpeedup the CPU leg's
	// seconds over the GPU leg's (best of each).
	GPUPrefill        *PrefillLeg    `json:"gpu_prefill,omitempty"`
	GPU               host.GPUStatus `json:"gpu"`
	GPUSpeedup        float64        `json:"gpu_speedup,omitempty"`
	GPUSameFirstToken *bool          `json:"gpu_same_first_token,omitempty"`

	PlannedProcessBytes     int64 `json:"planned_process_bytes"`
	AttentionWorkspaceBytes int64 `json:"attention_workspace_bytes"`
	// PeakRSSBytes and PeakFootprintBytes are the process's peaks over the
	// whole run (load included): the kernel's peak RSS, and the footprint
	// sampled every 100 ms. PeakOverPlan is PeakRSSBytes /
	// PlannedProcessBytes.
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	PeakFootprintBytes int64   `json:"peak_footprint_bytes"`
	PeakOverPlan       float64 `json:"peak_over_plan"`
}

// PrefillLeg is one way of running the prefill, measured over --repeat runs.
type PrefillLeg struct {
	// Seconds is the fastest run's prefill time; TokensPerSecond follows
	// from it.
	Seconds         float64   `json:"seconds"`
	TokensPerSecond float64   `json:"tokens_per_second"`
	RunSeconds      []float64 `json:"run_seconds"`
	FirstToken      int       `json:"first_token"`
	// ExpertsTouchedPerLayer is the mean distinct routed experts per
	// expert layer the prompt routed to (generate.Result's): a prompt
	// spreads over nearly every expert of a layer on a trained model, over
	// eight on one whose routers tie. Speed figures mean something only
	// on a model that spreads.
	ExpertsTouchedPerLayer float64 `json:"experts_touched_per_layer"`
	// StepSeconds is where the fastest run's forwards spent their time, by
	// step of the layer forward; GPUTimes where the GPU's operations did
	// (the GPU leg).
	StepSeconds map[string]float64 `json:"step_seconds,omitempty"`
	GPUTimes    *gpu.Times         `json:"gpu_times,omitempty"`
	// CopyWaitSeconds is the GPU leg's expert copying that the device did
	// not hide behind computation (gpu_times' copy_wait_seconds) and
	// CopyWaitShare its share of the leg's time: what is left of the
	// host-to-device copies a discrete GPU's prefill is bound by (0 where
	// the experts are used in place or resident).
	CopyWaitSeconds float64 `json:"copy_wait_seconds,omitempty"`
	CopyWaitShare   float64 `json:"copy_wait_share,omitempty"`

	// With streamed experts, of the first run: bytes read from storage
	// (aligned spans under direct I/O), per prompt token and per byte of
	// the model's routed experts; the experts read (cache misses); the
	// distinct layer/expert pairs routed and their bytes; and the bytes
	// read as a multiple of those (1 = every routed expert read once; small
	// experts add the alignment of direct reads).
	ExpertBytesRead         int64   `json:"expert_bytes_read,omitempty"`
	ExpertsRead             int64   `json:"experts_read,omitempty"`
	ExpertBytesPerToken     float64 `json:"expert_bytes_per_token,omitempty"`
	ExpertBytesPerModelByte float64 `json:"expert_bytes_per_model_byte,omitempty"`
	ExpertsTouched          int     `json:"experts_touched,omitempty"`
	TouchedExpertBytes      int64   `json:"touched_expert_bytes,omitempty"`
	ReadOverTouched         float64 `json:"read_over_touched,omitempty"`
	// MinLayerTouchedShare is the smallest share of one layer's experts
	// the prompt routed to.
	MinLayerTouchedShare float64 `json:"min_layer_touched_share,omitempty"`
}

// Prefill runs spool bench prefill on the model in dir: one prompt of
// seeded random ids through the model the way spool run prefills (in the
// plan's segments, layer by layer, with its buffers), on each leg f asks
// for.
func Prefill(ctx context.Context, dir string, f *PrefillOptions) (*PrefillResult, error) {
	switch f.Warm {
	case "", "all", "gpu":
	default:
		return nil, fmt.Errorf("--warm=%q: give no value (every leg) or gpu (the GPU leg only)", f.Warm)
	}
	peak := startPeakSampler(100 * time.Millisecond)
	defer peak.stop()

	cfg, w, err := host.WeightsOf(dir)
	if err != nil {
		return nil, err
	}
	if f.AllKeys && !w.DSA {
		return nil, fmt.Errorf("%s has no DSA indexer weights: --compare-all-keys has nothing to compare", dir)
	}
	b := &prefillRun{dir: dir, weights: w, flags: f}
	cpu, err := host.PreviewOpen(b.config(host.GPUOff, false, 0))
	if err != nil {
		return nil, err
	}
	p := cpu.Plan
	// The GPU leg's plan: the device's lines for chunks of the CPU leg's
	// rows, or why the GPU is not used (an error with --gpu on).
	mode, err := host.CheckGPUMode(f.GPU)
	if err != nil {
		return nil, err
	}
	gpuLeg, err := host.PreviewOpen(b.config(mode, false, p.PrefillSegment))
	if err != nil {
		return nil, err
	}
	status := gpuLeg.GPU
	if !status.Active && mode == host.GPUOn {
		return nil, fmt.Errorf("--gpu on: the GPU is not used: %s", status.Reason)
	}
	res := &PrefillResult{
		Model: dir, PromptTokens: f.Tokens, Context: f.Context, SegmentRows: p.PrefillSegment, ScratchRows: p.ScratchRows, Threads: runtime.GOMAXPROCS(0), GPU: status, Warm: f.Warm != "", WarmGPUOnly: f.Warm == "gpu",
		CacheSlotsPerLayer: p.CacheSlotsPerLayer, ExpertLayers: p.ExpertLayers, ExpertsPerLayer: p.ExpertsPerLayer,
		RoutedBytes: p.RoutedBytes, PlannedProcessBytes: p.PlannedProcessBytes,
	}
	b.res = res
	rng := rand.New(rand.NewPCG(f.Seed, 0x9e3779b9))
	prompt := make([]int, f.Tokens)
	for i := range prompt {
		prompt[i] = rng.IntN(cfg.VocabSize)
	}

	b.prompt = prompt
	var legs []prefillMode
	if !f.GPUOnly {
		legs = append(legs, prefillMode{cfg: b.config(host.GPUOff, false, 0), leg: &res.Prefill})
	}
	if f.AllKeys {
		res.AllKeys = &PrefillLeg{}
		legs = append(legs, prefillMode{cfg: b.config(host.GPUOff, true, 0), leg: res.AllKeys, allKeys: true})
	}
	if f.CompareChunk > 0 {
		if f.GPUOnly {
			return nil, errors.New("--compare-chunk compares with the CPU leg, which --gpu-only drops")
		}
		res.Chunked, res.ChunkRows = &PrefillLeg{}, min(f.CompareChunk, p.PrefillSegment)
		legs = append(legs, prefillMode{cfg: b.config(host.GPUOff, false, 0), leg: res.Chunked, chunk: res.ChunkRows})
	}
	if status.Active {
		res.GPUPrefill = &PrefillLeg{}
		legs = append(legs, prefillMode{cfg: b.config(mode, false, p.PrefillSegment), leg: res.GPUPrefill, gpu: true})
	}
	// Each run loads the model afresh (the attention mode is a load
	// option, the GPU keeps one model's weights), so every run meets the
	// same cold expert cache.
	for run := 0; run < f.Repeat; run++ {
		for _, mode := range legs {
			if err := b.run(ctx, mode, run == 0); err != nil {
				return nil, err
			}
		}
	}
	if f.AllKeys {
		res.DSASpeedup = res.AllKeys.Seconds / res.Prefill.Seconds
		same := res.AllKeys.FirstToken == res.Prefill.FirstToken
		res.SameFirstToken = &same
	}
	if res.Chunked != nil {
		res.SegmentSpeedup = res.Chunked.Seconds / res.Prefill.Seconds
		same := res.Chunked.FirstToken == res.Prefill.FirstToken
		res.ChunkedSameFirstToken = &same
	}
	if f.GPUOnly && !status.Active {
		return nil, fmt.Errorf("--gpu-only: the GPU is not used: %s", status.Reason)
	}
	if status.Active && !f.GPUOnly {
		res.GPUSpeedup = res.Prefill.Seconds / res.GPUPrefill.Seconds
		same := res.GPUPrefill.FirstToken == res.Prefill.FirstToken
		res.GPUSameFirstToken = &same
	}
	rss, fp := peak.stop()
	res.PeakRSSBytes, res.PeakFootprintBytes = int64(rss), int64(fp)
	if res.PlannedProcessBytes > 0 {
		res.PeakOverPlan = float64(res.PeakRSSBytes) / float64(res.PlannedProcessBytes)
	}
	return res, nil
}

// config is the engine of one leg: one sequence of --context tokens, the
// prefill chunk the plan's activation budget allows (or chunk rows when
// set), the expert cache of --cache-slots or the memory flags, the
// experts resident when they all fit the cache (unless --stream) and
// streamed through a tier of the plan's size otherwise, no MTP layer, no
// prompt cache, the GPU in mode.
func (b *prefillRun) config(mode string, allKeys bool, chunk int) host.Config {
	f := b.flags
	return host.Config{
		ModelDir: b.dir, Memory: f.Memory, Context: f.Context, MaxBatch: 1, NoMTP: true, ComputeAllKeys: allKeys,
		PromptCache: host.PromptCache{Off: true}, GPU: mode, GPUCopyExperts: f.CopyExperts, Log: io.Discard,
		ResidentWhenCached: !f.Stream, NoScheduler: true,
		Stream: func(p *plan.Plan) experts.StreamOptions {
			return experts.StreamOptions{CacheBytes: p.ExpertCacheBytes, WorkingSlots: p.WorkingSlots, FootprintLimit: p.MemoryLimitBytes}
		},
		TunePlan: func(cfg *config.Config, w plan.Weights, opts *plan.Options) error {
			opts.Segment = chunk
			if f.CacheSlots > 0 {
				probe, err := plan.New(cfg, w, *opts)
				if err != nil {
					return err
				}
				opts.ExpertCache = int64(f.CacheSlots) * probe.SlotSetBytes
			}
			return nil
		},
	}
}

// prefillRun is what every run of the benchmark shares.
type prefillRun struct {
	dir     string
	weights plan.Weights
	flags   *PrefillOptions
	prompt  []int
	res     *PrefillResult
}

// prefillMode is one leg of the benchmark: its engine, where it records
// its runs, and how it runs (every key computed on DSA layers, on the
// GPU, in chunks of chunk rows rather than the plan's segments).
type prefillMode struct {
	cfg          host.Config
	leg          *PrefillLeg
	allKeys, gpu bool
	chunk        int
}

// run loads the model in one mode, prefills the prompt once and records
// the run in the mode's leg (and, on the first run, the expert I/O).
func (b *prefillRun) run(ctx context.Context, mode prefillMode, first bool) error {
	f, res, prompt, leg := b.flags, b.res, b.prompt, mode.leg
	// What the previous run left is collected and returned first, so
	// that each run's peak is its own (host.Open bounds the Go runtime by
	// the plan's heap lines, as the engine's is).
	runtime.GC()
	debug.FreeOSMemory()
	e, err := host.Open(ctx, mode.cfg, nil)
	if err != nil {
		return err
	}
	defer e.Close()
	p, src, m := e.Plan, e.Experts, e.Model.Dir.Model // src nil: the experts are resident
	var g *host.GPU
	if mode.gpu {
		if g = e.GPU; !m.Accelerated() {
			return fmt.Errorf("the GPU leg: %s", g.Status().Reason)
		}
	}
	res.DSA = m.HasDSA()
	res.AttentionWorkspaceBytes = m.AttentionWorkspaceBytes()
	params := generate.Params{MaxTokens: 1, PrefillChunk: p.PrefillSegment}
	if mode.chunk > 0 {
		params.PrefillChunk = mode.chunk
	}
	if f.Warm == "all" || (f.Warm == "gpu" && mode.gpu) {
		if _, err := generate.Generate(ctx, m, m.NewSequence(f.Context), prompt, params, nil); err != nil {
			return err
		}
	}
	if src != nil {
		res.Streamed, res.DirectIO = true, src.Direct()
		src.ResetTurn()
		src.HitBitmap()
	}
	steps := &model.StepTimes{}
	m.SetStepTimes(steps)
	gpu0 := g.Times()
	stopProfile, err := b.startProfile(mode, first)
	if err != nil {
		return err
	}
	out, err := generate.Generate(ctx, m, m.NewSequence(f.Context), prompt, params, nil)
	stopProfile()
	if err != nil {
		return err
	}
	if g != nil && !m.Accelerated() {
		return fmt.Errorf("the GPU failed during the prefill (%s): the GPU leg's time would be the CPU's", g.Status().Reason)
	}
	s := out.PrefillTime.Seconds()
	leg.RunSeconds = append(leg.RunSeconds, s)
	if leg.Seconds == 0 || s < leg.Seconds {
		leg.Seconds = s
		leg.TokensPerSecond = float64(len(prompt)) / s
		leg.StepSeconds = steps.Seconds()
		if g != nil {
			t := g.Times().Sub(gpu0)
			leg.GPUTimes = &t
			leg.CopyWaitSeconds, leg.CopyWaitShare = t.CopyWait, t.CopyWait/s
		}
	}
	leg.FirstToken = out.Tokens[0]
	leg.ExpertsTouchedPerLayer = out.ExpertsTouchedPerLayer()
	if src != nil && first {
		recordExpertIO(src, p, b.weights, out, len(prompt), leg)
	}
	return nil
}

// startProfile starts --cpuprofile's CPU profile when this is the run it
// covers (the first timed run of the GPU leg, or of the CPU leg when there
// is no GPU leg) and returns what stops it.
func (b *prefillRun) startProfile(mode prefillMode, first bool) (stop func(), err error) {
	if b.flags.CPUProfile == "" || !first || mode.allKeys || mode.chunk > 0 || mode.gpu != (b.res.GPUPrefill != nil) {
		return func() {}, nil
	}
	f, err := os.Create(b.flags.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// recordExpertIO fills leg's expert I/O figures: what the prefill just run
// read (its forwards' own record, out) against what it routed to (the
// streamed tier's hit bitmap).
func recordExpertIO(src *experts.Streamed, p *plan.Plan, w plan.Weights, out *generate.Result, tokens int, leg *PrefillLeg) {
	expertBytes := map[int]int64{}
	for _, l := range w.Layers {
		expertBytes[l.Layer] = l.ExpertBytes
	}
	st := src.Stats()
	hits := src.HitBitmap()
	E := p.ExpertsPerLayer
	read := out.PrefillExpertBytes + out.DecodeExpertBytes
	leg.ExpertBytesRead, leg.ExpertsRead = read, int64(out.PrefillExpertsRead+out.DecodeExpertsRead)
	leg.ExpertBytesPerToken = float64(read) / float64(tokens)
	if p.RoutedBytes > 0 {
		leg.ExpertBytesPerModelByte = float64(read) / float64(p.RoutedBytes)
	}
	leg.MinLayerTouchedShare = 1
	for row, ls := range st.Layers {
		n := 0
		for e := range E {
			b := row*E + e
			n += bits.OnesCount8(hits[b>>3] >> (b & 7) & 1)
		}
		if ls.Turn.Hits+ls.Turn.Misses == 0 {
			continue // a layer the prefill did not route through (MTP)
		}
		leg.ExpertsTouched += n
		leg.TouchedExpertBytes += int64(n) * expertBytes[ls.Layer]
		leg.MinLayerTouchedShare = min(leg.MinLayerTouchedShare, float64(n)/float64(E))
	}
	if leg.TouchedExpertBytes > 0 {
		leg.ReadOverTouched = float64(leg.ExpertBytesRead) / float64(leg.TouchedExpertBytes)
	}
}
