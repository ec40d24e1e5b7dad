package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/scheduler"
)

// ReserveOptions are the settings of Reserve (spool bench reserve's
// flags).
type ReserveOptions struct {
	// Memory is the budget planned against (--memory); the expert cache
	// is one slot per layer whatever it says, so that the prompt fills it.
	Memory host.Memory
	// Tokens is the prompt's length and Decode the tokens generated after
	// it; the context planned is their sum, so the KV cache line fills.
	Tokens, Decode int
	// GPU is the --gpu mode.
	GPU string
	// Seed seeds the prompt ids.
	Seed uint64
}

// ReserveResult is the result of spool bench reserve: the process's peak
// memory beside the plan's lines, the measure of what the runtime reserve
// line must hold.
type ReserveResult struct {
	Model        string         `json:"model"`
	PromptTokens int            `json:"prompt_tokens"`
	DecodeTokens int            `json:"decode_tokens"`
	Context      int            `json:"context"`
	GPU          host.GPUStatus `json:"gpu"`
	// Items are the plan's lines; PlannedLinesBytes is their sum but the
	// runtime reserve, RuntimeReserveBytes the reserve line.
	Items               []plan.Item `json:"items"`
	PlannedLinesBytes   int64       `json:"planned_lines_bytes"`
	RuntimeReserveBytes int64       `json:"runtime_reserve_bytes"`
	// PeakRSSBytes and PeakFootprintBytes are the process's peaks over
	// the whole run (its start included): the kernel's peak RSS, and the
	// footprint sampled every 100 ms.
	PeakRSSBytes       int64 `json:"peak_rss_bytes"`
	PeakFootprintBytes int64 `json:"peak_footprint_bytes"`
	// BeyondLinesBytes is PeakRSSBytes less PlannedLinesBytes: the memory
	// the process held beyond every line but the reserve, at its peak
	// (each line filled: the prompt reaches every expert cache slot and
	// the context's end). BeyondFootprintBytes is the same of the
	// footprint. ReserveUse is BeyondLinesBytes over the reserve line.
	BeyondLinesBytes     int64   `json:"beyond_lines_bytes"`
	BeyondFootprintBytes int64   `json:"beyond_footprint_bytes"`
	ReserveUse           float64 `json:"reserve_use"`
	// The Go runtime's own account at the end (runtime/metrics): all the
	// memory it maps, the heap's objects (live and not yet collected),
	// goroutine stacks, and its metadata; and the memory limit the plan
	// set.
	GoTotalBytes       int64 `json:"go_total_bytes"`
	GoHeapObjectsBytes int64 `json:"go_heap_objects_bytes"`
	GoStackBytes       int64 `json:"go_stack_bytes"`
	GoMetadataBytes    int64 `json:"go_metadata_bytes"`
	GoMemoryLimitBytes int64 `json:"go_memory_limit_bytes"`
	// Tokens is what the run generated (a check that it ran).
	Tokens int `json:"tokens"`
}

// Reserve runs spool bench reserve on the model modelFlag names
// (host.ResolveModelDir): the engine spool serve builds (memory plan,
// streamed expert tier of one cache slot per layer, scheduler, the Go
// memory limit; no prompt cache), one request of f.Tokens seeded random
// ids that generates f.Decode tokens, and the process's peak memory
// against the plan's lines.
func Reserve(ctx context.Context, modelFlag string, f ReserveOptions) (*ReserveResult, error) {
	if f.Tokens < 1 || f.Decode < 1 {
		return nil, fmt.Errorf("--tokens and --decode must be positive (got %d and %d)", f.Tokens, f.Decode)
	}
	peak := startPeakSampler(100 * time.Millisecond)
	defer peak.stop()
	path, err := host.ResolveModelDir(modelFlag)
	if err != nil {
		return nil, err
	}
	cfg := host.Config{
		ModelDir: path, Memory: f.Memory, Context: f.Tokens + f.Decode, MaxBatch: 1, IdleSequences: -1,
		PromptCache: host.PromptCache{Off: true}, GPU: f.GPU,
	}
	lm, err := host.OpenModel(path)
	if err != nil {
		return nil, err
	}
	mc := lm.Dir.Config
	if cfg.Context > mc.MaxPositionEmbeddings {
		lm.Close()
		return nil, fmt.Errorf("--tokens %d + --decode %d exceed the model's %d positions", f.Tokens, f.Decode, mc.MaxPositionEmbeddings)
	}
	probe, err := host.PlanFor(lm.Dir, cfg, nil)
	lm.Close()
	if err != nil {
		return nil, err
	}
	cfg.Memory.ExpertCache = strconv.FormatInt(probe.SlotSetBytes, 10)

	rng := rand.New(rand.NewPCG(f.Seed, 0x7e5))
	prompt := make([]int, f.Tokens)
	for i := range prompt {
		prompt[i] = rng.IntN(mc.VocabSize)
	}
	e, err := host.Open(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	p := e.Plan
	r := &ReserveResult{Model: path, PromptTokens: f.Tokens, DecodeTokens: f.Decode, Context: p.Context, GPU: e.GPU.Status(), Items: p.Items, GoMemoryLimitBytes: p.GoMemoryLimitBytes}
	for _, it := range p.Items {
		if it.Name == plan.ItemRuntime {
			r.RuntimeReserveBytes = it.Bytes
		} else {
			r.PlannedLinesBytes += it.Bytes
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Scheduler.Run(runCtx)
	}()
	r.Tokens, err = generateAll(ctx, e.Scheduler, prompt, f.Decode)
	cancel()
	<-done
	if err != nil {
		return nil, err
	}
	rss, fp := peak.stop()
	r.PeakRSSBytes, r.PeakFootprintBytes = int64(rss), int64(fp)
	r.BeyondLinesBytes = r.PeakRSSBytes - r.PlannedLinesBytes
	r.BeyondFootprintBytes = r.PeakFootprintBytes - r.PlannedLinesBytes
	if r.RuntimeReserveBytes > 0 {
		r.ReserveUse = float64(r.BeyondLinesBytes) / float64(r.RuntimeReserveBytes)
	}
	r.GoTotalBytes, r.GoHeapObjectsBytes, r.GoStackBytes, r.GoMetadataBytes = goMemory()
	return r, nil
}

// generateAll submits prompt as the server does (speculative, never
// stopping early) and waits for its decode tokens.
func generateAll(ctx context.Context, s *scheduler.Scheduler, prompt []int, decode int) (int, error) {
	st, err := s.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: decode, Speculative: true}})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		toks, res, err := st.Next(ctx)
		if err != nil {
			return n, err
		}
		n += len(toks)
		if res != nil {
			return n, res.Err
		}
	}
}

// goMemory reads the Go runtime's memory classes: all it maps, the heap's
// objects, the stacks and its metadata.
func goMemory() (total, heap, stacks, metadata int64) {
	names := []string{
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/metadata/other:bytes",
		"/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/mcache/inuse:bytes",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	return v(0), v(1), v(2) + v(3), v(4) + v(5) + v(6)
}
