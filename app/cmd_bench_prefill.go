package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels/gpu"
)

// prefillBench is the result of spool bench prefill.
type prefillBench struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	Context      int    `json:"context"`
	// ChunkRows is the most prompt rows one forward carries (both legs).
	ChunkRows int  `json:"chunk_rows"`
	DSA       bool `json:"dsa"`
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
	Prefill prefillLeg  `json:"prefill"`
	AllKeys *prefillLeg `json:"all_keys,omitempty"`
	// DSASpeedup is AllKeys seconds over Prefill seconds (best of each).
	DSASpeedup float64 `json:"dsa_speedup,omitempty"`
	// SameFirstToken says both legs sampled the same first token.
	SameFirstToken *bool `json:"same_first_token,omitempty"`

	// GPUPrefill is the same prefill with the chunks' heavy steps on the
	// GPU (--gpu; decode and the CPU leg stay as they are), GPU the device,
	// its plan lines or why it was not used, and GPUSpeedup the CPU leg's
	// seconds over the GPU leg's (best of each).
	GPUPrefill        *prefillLeg `json:"gpu_prefill,omitempty"`
	GPU               gpuStatus   `json:"gpu"`
	GPUSpeedup        float64     `json:"gpu_speedup,omitempty"`
	GPUSameFirstToken *bool       `json:"gpu_same_first_token,omitempty"`

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

// prefillLeg is one way of running the prefill, measured over --repeat runs.
type prefillLeg struct {
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

type prefillFlags struct {
	model       string
	mem         memoryFlags
	tokens      int
	context     int
	cacheSlots  int
	stream      bool
	allKeys     bool
	gpu         gpuFlag
	warm        string // "", "all" or "gpu"
	repeat      int
	seed        uint64
	asJSON      bool
	cpuProfile  string
	gpuOnly     bool
	copyExperts bool
}

func newBenchPrefillCmd() *cobra.Command {
	var f prefillFlags
	cmd := &cobra.Command{
		Use:   "prefill --model DIR",
		Short: "Measure prefill speed, expert bytes read and peak memory against the plan",
		Long: `Prefill runs one prompt of --tokens seeded random ids through the model the
way spool run does (chunked prefill, the plan's buffers) and reports prefill
tok/s, the process's peak footprint against the plan's planned process bytes,
and with streamed experts (--stream, or when the plan cannot keep every
expert) the expert bytes read from storage: per prompt token, per byte of
the model's routed experts, and as a multiple of the experts the prompt was
routed to (1 = each read once).

--compare-all-keys runs the same prefill a second way in the same run: DSA
layers compute every causal key and mask the unselected ones, as attention
did before it was sparse. dsa_speedup is that time over the sparse time
(best of --repeat runs each, alternated).

--gpu adds a GPU leg in the same run: the same prompt in chunks of the same
size with their heavy steps on the GPU (Vulkan). auto (the default) adds it
when a GPU whose memory holds the plan's GPU lines is found (not a CPU
implementation of Vulkan), on requires one (lavapipe counts) and fails
without it, off runs the CPU alone. gpu_speedup is the CPU time over the
GPU time; the gpu object names the device and its memory lines.

Each run starts from a freshly loaded model with a cold expert cache, so a
leg's time includes reading the experts the prompt routes to. --warm first
prefills the prompt once, untimed, on the loaded model: the timed run then
measures compute with the experts cached (as far as the cache holds them)
and the GPU's pipelines built. --warm=gpu warms the GPU leg only: the CPU
reads experts while it computes, so its cold time is already its compute
time, and the warm-up would only double the run.

Use the gen-bench model for real I/O and the sparse-files skeleton for the
real geometry.`,
		Example: `  spool bench prefill --model assets/models/glm52-mini --tokens 16000 --compare-all-keys --json
  spool gen-bench --out /tmp/bench --sparse-layers 4 --experts 64
  spool bench prefill --model /tmp/bench --tokens 2048 --stream --cache-slots 2 --json
  spool gen-bench --out /tmp/skeleton --sparse-files
  spool bench prefill --model /tmp/skeleton --tokens 512 --gpu on --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.tokens < 1 {
				return fmt.Errorf("--tokens must be positive, got %d", f.tokens)
			}
			if f.repeat < 1 {
				return fmt.Errorf("--repeat must be positive, got %d", f.repeat)
			}
			if f.cacheSlots < 0 {
				return fmt.Errorf("--cache-slots must not be negative, got %d", f.cacheSlots)
			}
			if f.cacheSlots > 0 && f.mem.expertCache != "" {
				return errors.New("--cache-slots and --expert-cache both size the expert cache; give one")
			}
			if f.context == 0 {
				f.context = f.tokens + 1
			}
			if mode, err := f.gpu.check(); err != nil {
				return err
			} else if f.gpuOnly && (mode == gpuOff || f.allKeys) {
				return errors.New("--gpu-only needs --gpu auto or on, and no --compare-all-keys")
			}
			if f.context <= f.tokens {
				return fmt.Errorf("--context %d must exceed --tokens %d (the prompt and the token sampled after it)", f.context, f.tokens)
			}
			dir, err := resolveModelDir(f.model)
			if err != nil {
				return err
			}
			res, err := runPrefillBench(cmd.Context(), dir, &f)
			if err != nil {
				return err
			}
			return printPrefillBench(cmd, res, f.asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default: $SPOOL_MODEL, then the demo model)")
	f.mem.register(fl)
	fl.IntVar(&f.tokens, "tokens", 2048, "prompt tokens")
	fl.IntVar(&f.context, "context", 0, "context length planned (default: --tokens + 1)")
	fl.IntVar(&f.cacheSlots, "cache-slots", 0, "expert cache slots per expert layer (instead of --expert-cache)")
	fl.BoolVar(&f.stream, "stream", false, "stream experts from disk even when the plan could keep them all")
	fl.BoolVar(&f.allKeys, "compare-all-keys", false, "also run the prefill with every key computed on DSA layers and report the speedup")
	fl.StringVar(&f.gpu.mode, "gpu", gpuAuto, "also run the prefill on the GPU and report the speedup: auto (when a GPU, not a CPU Vulkan device, holds the plan), on (any Vulkan device; fail without one), off")
	fl.StringVar(&f.warm, "warm", "", "prefill the prompt once, untimed, before each timed run (warm expert cache and GPU pipelines); --warm=gpu: the GPU leg only")
	fl.Lookup("warm").NoOptDefVal = "all"
	fl.IntVar(&f.repeat, "repeat", 1, "runs of each leg (alternated; the fastest counts)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the prompt ids")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&f.gpuOnly, "gpu-only", false, "run the GPU leg alone (to profile it): no CPU leg and no speedup")
	fl.BoolVar(&f.copyExperts, "copy-experts", false, "the GPU leg copies routed experts into its bank even where the device could use them in place (unified memory): to measure the copies")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the first timed run of the GPU leg (of the CPU leg without one) to this file")
	return cmd
}

func runPrefillBench(ctx context.Context, dir string, f *prefillFlags) (*prefillBench, error) {
	switch f.warm {
	case "", "all", "gpu":
	default:
		return nil, fmt.Errorf("--warm=%q: give no value (every leg) or gpu (the GPU leg only)", f.warm)
	}
	peak := startPeakSampler(100 * time.Millisecond)
	defer peak.stop()

	cfg, w, err := weightsFromModel(dir)
	if err != nil {
		return nil, err
	}
	if f.allKeys && !w.DSA {
		return nil, fmt.Errorf("%s has no DSA indexer weights: --compare-all-keys has nothing to compare", dir)
	}
	p, err := planPrefill(cfg, w, f, nil, 0)
	if err != nil {
		return nil, err
	}
	gp, status, err := planGPUPrefill(cfg, w, f, p.PrefillChunk)
	if err != nil {
		return nil, err
	}
	res := &prefillBench{
		Model: dir, PromptTokens: f.tokens, Context: f.context, ChunkRows: p.PrefillChunk, Threads: runtime.GOMAXPROCS(0), GPU: status, Warm: f.warm != "", WarmGPUOnly: f.warm == "gpu",
		CacheSlotsPerLayer: p.CacheSlotsPerLayer, ExpertLayers: p.ExpertLayers, ExpertsPerLayer: p.ExpertsPerLayer,
		RoutedBytes: p.RoutedBytes, PlannedProcessBytes: p.PlannedProcessBytes,
	}
	rng := rand.New(rand.NewPCG(f.seed, 0x9e3779b9))
	prompt := make([]int, f.tokens)
	for i := range prompt {
		prompt[i] = rng.IntN(cfg.VocabSize)
	}

	var legs []prefillMode
	if !f.gpuOnly {
		legs = append(legs, prefillMode{plan: p, leg: &res.Prefill})
	}
	if f.allKeys {
		res.AllKeys = &prefillLeg{}
		legs = append(legs, prefillMode{plan: p, leg: res.AllKeys, allKeys: true})
	}
	if gp != nil {
		res.GPUPrefill = &prefillLeg{}
		legs = append(legs, prefillMode{plan: gp, leg: res.GPUPrefill, gpu: true})
	}
	// Each run loads the model afresh (the attention mode is a load
	// option, the GPU keeps one model's weights), so every run meets the
	// same cold expert cache.
	b := &prefillRun{dir: dir, weights: w, flags: f, prompt: prompt, res: res}
	for run := 0; run < f.repeat; run++ {
		for _, mode := range legs {
			if err := b.run(ctx, mode, run == 0); err != nil {
				return nil, err
			}
		}
	}
	if f.allKeys {
		res.DSASpeedup = res.AllKeys.Seconds / res.Prefill.Seconds
		same := res.AllKeys.FirstToken == res.Prefill.FirstToken
		res.SameFirstToken = &same
	}
	if f.gpuOnly && gp == nil {
		return nil, fmt.Errorf("--gpu-only: the GPU is not used: %s", status.Reason)
	}
	if gp != nil && !f.gpuOnly {
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

// planPrefill plans the run: one sequence of --context tokens, the prefill
// chunk the plan's activation budget allows (or chunk rows when set), the
// expert cache of --cache-slots or the memory flags, and the lines of dev
// when prefill runs on a GPU.
func planPrefill(cfg *config.Config, w plan.Weights, f *prefillFlags, dev *plan.GPUDevice, chunk int) (*plan.Plan, error) {
	opts, err := f.mem.options()
	if err != nil {
		return nil, err
	}
	opts.Context, opts.Sequences, opts.GPU, opts.BatchRows = f.context, 1, dev, chunk
	if f.cacheSlots > 0 {
		probe, err := plan.New(cfg, w, opts)
		if err != nil {
			return nil, err
		}
		opts.ExpertCache = int64(f.cacheSlots) * probe.SlotRowBytes
	}
	p, err := plan.New(cfg, w, opts)
	if err != nil {
		return nil, err
	}
	return p, p.Err()
}

// planGPUPrefill plans the GPU leg of --gpu: the device's lines for
// chunks of the CPU leg's rows. It returns no plan, and the reason in the
// status, where the GPU is not used (an error with --gpu on).
func planGPUPrefill(cfg *config.Config, w plan.Weights, f *prefillFlags, chunk int) (*plan.Plan, gpuStatus, error) {
	mode, _ := f.gpu.check()
	g := openGPU(mode, nil)
	defer g.Close() // each GPU run opens the device afresh
	if g.dev == nil {
		st := g.Status()
		if mode == gpuOn {
			return nil, st, fmt.Errorf("--gpu on: no GPU: %s", st.Reason)
		}
		return nil, st, nil
	}
	p, err := planPrefill(cfg, w, f, g.device(), chunk)
	var fit *plan.FitError
	switch {
	case errors.As(err, &fit):
		g.drop("the memory plan with the GPU lines does not fit: " + fit.Plan.Problem)
	case err != nil:
		return nil, g.Status(), err
	default:
		if reason := g.misfit(p); reason != "" {
			g.drop(reason)
			p = nil
		}
	}
	st := g.Status()
	if p == nil && mode == gpuOn {
		return nil, st, fmt.Errorf("--gpu on: the GPU is not used: %s", st.Reason)
	}
	st.Active = p != nil
	return p, st, nil
}

// prefillRun is what every run of the benchmark shares.
type prefillRun struct {
	dir     string
	weights plan.Weights
	flags   *prefillFlags
	prompt  []int
	res     *prefillBench
}

// prefillMode is one leg of the benchmark: its plan, where it records its
// runs, and how it runs (every key computed on DSA layers, on the GPU).
type prefillMode struct {
	plan         *plan.Plan
	leg          *prefillLeg
	allKeys, gpu bool
}

// run loads the model in one mode, prefills the prompt once and records
// the run in the mode's leg (and, on the first run, the expert I/O).
func (b *prefillRun) run(ctx context.Context, mode prefillMode, first bool) error {
	p, f, res, prompt, leg := mode.plan, b.flags, b.res, b.prompt, mode.leg
	var src *experts.Streamed
	opts := loader.Options{Model: plannedModel(p, model.Options{DisableMTP: true, ComputeAllKeys: mode.allKeys})}
	if f.stream || !p.AllExpertsCached() {
		opts.Experts = func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			var err error
			src, err = experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{
				CacheBytes: p.ExpertCacheBytes, WorkingSlots: p.WorkingSlots, FootprintLimit: p.MemoryLimitBytes,
			})
			return src, err
		}
	}
	d, err := loader.Open(ctx, b.dir, opts) // on error it closes src
	if err != nil {
		return err
	}
	defer d.Close()
	m := d.Model
	var g *gpuBackend
	if mode.gpu {
		g = openGPUWith(gpuOn, nil, gpu.Options{Device: -1, CopyExperts: f.copyExperts})
		defer g.Close() // before the model's memory goes
		if g.attach(m, p); !m.Accelerated() {
			return fmt.Errorf("the GPU leg: %s", g.Status().Reason)
		}
	}
	res.DSA = m.HasDSA()
	res.AttentionWorkspaceBytes = m.AttentionWorkspaceBytes()
	params := generate.Params{MaxTokens: 1, PrefillChunk: p.PrefillChunk}
	if f.warm == "all" || (f.warm == "gpu" && mode.gpu) {
		if _, err := generate.Generate(ctx, m, m.NewSequence(f.context), prompt, params, nil); err != nil {
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
	gpu0 := g.times()
	stopProfile, err := b.startProfile(mode, first)
	if err != nil {
		return err
	}
	out, err := generate.Generate(ctx, m, m.NewSequence(f.context), prompt, params, nil)
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
			t := g.times().Sub(gpu0)
			leg.GPUTimes = &t
			leg.CopyWaitSeconds, leg.CopyWaitShare = t.CopyWait, t.CopyWait/s
		}
	}
	leg.FirstToken = out.Tokens[0]
	leg.ExpertsTouchedPerLayer = out.ExpertsTouchedPerLayer()
	if src != nil && first {
		recordExpertIO(src, p, b.weights, len(prompt), leg)
	}
	return nil
}

// startProfile starts --cpuprofile's CPU profile when this is the run it
// covers (the first timed run of the GPU leg, or of the CPU leg when there
// is no GPU leg) and returns what stops it.
func (b *prefillRun) startProfile(mode prefillMode, first bool) (stop func(), err error) {
	if b.flags.cpuProfile == "" || !first || mode.allKeys || mode.gpu != (b.res.GPUPrefill != nil) {
		return func() {}, nil
	}
	f, err := os.Create(b.flags.cpuProfile)
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

// recordExpertIO fills leg's expert I/O figures from the streamed tier's
// counters of the prefill just run.
func recordExpertIO(src *experts.Streamed, p *plan.Plan, w plan.Weights, tokens int, leg *prefillLeg) {
	expertBytes := map[int]int64{}
	for _, l := range w.Layers {
		expertBytes[l.Layer] = l.ExpertBytes
	}
	st := src.Stats()
	hits := src.HitBitmap()
	E := p.ExpertsPerLayer
	leg.ExpertBytesRead, leg.ExpertsRead = st.Turn.BytesRead, st.Turn.Misses
	leg.ExpertBytesPerToken = float64(st.Turn.BytesRead) / float64(tokens)
	if p.RoutedBytes > 0 {
		leg.ExpertBytesPerModelByte = float64(st.Turn.BytesRead) / float64(p.RoutedBytes)
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

func printPrefillBench(cmd *cobra.Command, r *prefillBench, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%d expert layers x %d experts, DSA %v)\n", r.Model, r.ExpertLayers, r.ExpertsPerLayer, r.DSA)
	fmt.Fprintf(tw, "prompt\t%d tokens, context %d, chunks of %d rows, warm %v\n", r.PromptTokens, r.Context, r.ChunkRows, r.Warm)
	leg := func(name string, l *prefillLeg) {
		fmt.Fprintf(tw, "%s\t%.2fs: %.1f tok/s (runs %v); %.1f experts routed per expert layer\n", name, l.Seconds, l.TokensPerSecond, l.RunSeconds, l.ExpertsTouchedPerLayer)
		if r.Streamed && l.ExpertBytesRead > 0 {
			fmt.Fprintf(tw, "  expert bytes read\t%s in %d reads: %s per token, %.3f per model byte, %.3fx the %d experts routed (%s)\n",
				plan.SizeText(l.ExpertBytesRead), l.ExpertsRead, plan.SizeText(int64(l.ExpertBytesPerToken)), l.ExpertBytesPerModelByte,
				l.ReadOverTouched, l.ExpertsTouched, plan.SizeText(l.TouchedExpertBytes))
			fmt.Fprintf(tw, "  experts routed\tat least %.1f%% of each layer's\n", 100*l.MinLayerTouchedShare)
		}
	}
	if r.Prefill.Seconds > 0 {
		leg("prefill", &r.Prefill)
	}
	if r.AllKeys != nil {
		leg("all keys computed", r.AllKeys)
		fmt.Fprintf(tw, "DSA speedup\t%.2fx\t(all keys / sparse; same first token %v)\n", r.DSASpeedup, *r.SameFirstToken)
	}
	if r.GPUPrefill != nil {
		leg("GPU prefill", r.GPUPrefill)
		if t := r.GPUPrefill.GPUTimes; t != nil {
			fmt.Fprintf(tw, "  routed experts	%d copied, %d resident on the device, %d in place; copy wait %.2fs (%.1f%% of the leg)\n",
				t.ExpertsCopied, t.ExpertsResident, t.ExpertsInPlace, r.GPUPrefill.CopyWaitSeconds, 100*r.GPUPrefill.CopyWaitShare)
		}
		if r.GPUSameFirstToken != nil {
			fmt.Fprintf(tw, "GPU speedup\t%.2fx\t(CPU / GPU on %s, %d CPU threads; same first token %v)\n", r.GPUSpeedup, r.GPU.Device, r.Threads, *r.GPUSameFirstToken)
		}
	} else if r.GPU.Mode != gpuOff {
		fmt.Fprintf(tw, "GPU\tnot used: %s\n", r.GPU.Reason)
	}
	if r.Streamed {
		fmt.Fprintf(tw, "expert cache\t%d slots per layer, direct I/O %v\n", r.CacheSlotsPerLayer, r.DirectIO)
	}
	fmt.Fprintf(tw, "peak\tRSS %s, footprint %s; plan %s (%.2f of it); attention workspace %s\n",
		plan.SizeText(r.PeakRSSBytes), plan.SizeText(r.PeakFootprintBytes), plan.SizeText(r.PlannedProcessBytes), r.PeakOverPlan,
		plan.SizeText(r.AttentionWorkspaceBytes))
	return tw.Flush()
}
