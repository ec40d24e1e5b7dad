package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/internal/bytesize"
)

const (
	// DefaultContext is the context length planned when none is given.
	DefaultContext = 4096
	// MinPrefillSegment is the shortest prompt segment the plan chooses (a
	// shorter context bounds it too): below it a prompt re-reads the
	// routed experts too often.
	MinPrefillSegment = 512
	// DefaultThreads is the worker goroutines planned when none is given:
	// the performance cores of an Apple silicon Pro chip. Callers pass the
	// process's GOMAXPROCS.
	DefaultThreads = 10
	// DefaultRuntimeReserve covers what no other line item counts: the Go
	// runtime and its collector's headroom over the small allocations,
	// goroutine stacks, the tokenizer (155k-entry vocabulary and merges),
	// the chat template, the HTTP server, read queues, the binary and its
	// libraries, and the GPU driver's own memory. spool bench reserve
	// measures it: the process's peak beyond every other line was 27-35
	// MiB serving the demo and a gen-bench model headless on Linux (the
	// synthetic 154,880-entry tokenizer holds 7 MiB); the app adds its
	// window (Wails, the WebKit view's in-process part) and, on a Mac,
	// Metal through MoltenVK. 512 MiB holds that several times over and
	// gives the collector room under the Go memory limit.
	DefaultRuntimeReserve int64 = 512 << 20
	// MinOSReserve is the smallest memory left to the operating system.
	MinOSReserve int64 = 2 << 30

	// SlotAlign is the alignment of an expert slot: the 16 KiB page of
	// Apple silicon, a multiple of the 4 KiB direct-I/O alignment.
	SlotAlign int64 = 16 << 10
)

// SlotBytes is the slab one expert of expertBytes occupies: its size
// rounded up to SlotAlign, plus one SlotAlign of slack so that direct I/O
// can start its reads at an aligned offset below the expert's first byte
// (weights and scales each begin anywhere in the file).
func SlotBytes(expertBytes int64) int64 {
	if expertBytes <= 0 {
		return 0
	}
	return (expertBytes+SlotAlign-1)/SlotAlign*SlotAlign + SlotAlign
}

// DefaultOSReserve is the memory left to the operating system out of a
// machine of memory bytes: an eighth of it, at least MinOSReserve. On a
// 32 GiB Mac that is 4 GiB for the kernel, WindowServer and the user's
// other apps; on 16 GiB, 2 GiB.
func DefaultOSReserve(memory int64) int64 { return max(MinOSReserve, memory/8) }

// Options shape the run being planned. Zero fields take the defaults.
type Options struct {
	// Memory is the machine memory the plan may use, OS reserve included.
	// 0 asks MachineMemory.
	Memory int64
	// MachineMemory reports the machine's memory (for example
	// sysinfo.MachineMemory's total); it is used only when Memory is 0.
	MachineMemory func() (int64, error)
	// Context is the context length of each sequence (DefaultContext).
	Context int
	// Sequences is the number of KV slots: sequences decoded together (1).
	Sequences int
	// Segment, when set, fixes the prefill segment: the prompt tokens one
	// forward carries. 0 lets the plan choose the longest segment the
	// prefill budget allows (see Plan.PrefillSegment).
	Segment int
	// Threads is the goroutines that apply experts and attention heads
	// (DefaultThreads); the per-worker lines grow with it.
	Threads int
	// WorkingSlots overrides the working bank's slot count.
	WorkingSlots int
	// ExpertCache is the LRU + pinned slot memory beyond the working bank;
	// 0 gives the cache everything that remains.
	ExpertCache int64
	// RuntimeReserve overrides DefaultRuntimeReserve.
	RuntimeReserve int64
	// OSReserve overrides DefaultOSReserve(Memory).
	OSReserve int64
	// PromptCache, when set, plans the prompt cache's lines: what
	// promptcache.Footprint reports for its options (the cache is built
	// after the plan, with Plan.PromptCacheBytes as its memory tier). A
	// TierBytes of 0 lets the plan size the memory tier (see
	// PromptCacheShare).
	PromptCache *PromptCacheMemory
	// KVBF16 plans the KV cache in bfloat16 (--kv-cache bf16): half the
	// KV line, each cached value rounded (the default float32 is exact).
	KVBF16 bool
	// GPU is the device prefill segments run on (nil: the CPU). Its lines
	// are the plan's (Plan.GPU); on unified memory they are lines of the
	// process as well, and a discrete device's memory bounds the segment.
	GPU *GPUDevice
}

// Item is one line of the equation.
type Item struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	Detail string `json:"detail"`
}

// Item names.
const (
	ItemResident  = "resident weights"
	ItemEmbedding = "embedding rows"
	ItemWorking   = "working bank"
	ItemMTPBank   = "MTP bank"
	ItemCache     = "expert cache (LRU + pinned)"
	ItemKV        = "KV cache"
	ItemSegment   = "prefill segment"
	ItemScratch   = "prefill scratch"
	ItemLogits    = "logits"
	ItemWorkers   = "expert workers"
	ItemDecoders  = "decoder state"
	ItemRuntime   = "runtime reserve"
	ItemChecksums = "expert checksums"
)

// Plan is the process memory equation of one run:
// PlannedProcessBytes = Σ Items ≤ MemoryLimitBytes = MemoryBytes −
// OSReserveBytes.
type Plan struct {
	Source string `json:"source"`

	MemoryBytes         int64 `json:"memory_bytes"`
	OSReserveBytes      int64 `json:"os_reserve_bytes"`
	MemoryLimitBytes    int64 `json:"memory_limit_bytes"`
	PlannedProcessBytes int64 `json:"planned_process_bytes"`
	Fits                bool  `json:"fits"`

	// ResidentWeightBytes is the resident weights line: every non-routed
	// tensor but the embedding table, which is read by row on demand into
	// EmbeddingRows cached rows (the embedding line).
	ResidentWeightBytes int64 `json:"resident_weight_bytes"`
	RoutedBytes         int64 `json:"routed_bytes"`
	EmbeddingRows       int   `json:"embedding_rows"`
	// ExpertSlotBytes is the slab of one decoder-layer expert slot.
	ExpertSlotBytes int64 `json:"expert_slot_bytes"`
	// MTPSlotBytes is the slab of one MTP expert slot (0 without MTP).
	MTPSlotBytes    int64 `json:"mtp_slot_bytes"`
	KVBytes         int64 `json:"kv_bytes"`
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
	// KVCache is the KV cache's type: "float32" or "bfloat16".
	KVCache string `json:"kv_cache"`

	Context   int `json:"context"`
	Sequences int `json:"sequences"`
	// PrefillSegment is the prompt tokens one forward takes, layer by
	// layer over all of them: the longest segment whose buffer lines fit
	// the prefill budget, at most the context. Each routed expert is read
	// at most once per segment; a prompt within it is read once.
	PrefillSegment int `json:"prefill_segment"`
	// BatchRows is the most rows one forward carries: a prompt segment and
	// a decode row of every other sequence (two rows for a lone
	// speculative one); ScratchRows the most rows a layer's steps work on
	// at once; LogitRows the most rows whose logits it returns.
	BatchRows   int `json:"batch_rows"`
	ScratchRows int `json:"scratch_rows"`
	LogitRows   int `json:"logit_rows"`
	Threads     int `json:"threads"`
	// PrefillBudgetBytes is what the buffer lines may take: those of the
	// shortest segment and half of what the fixed lines, they and the
	// expert cache's floor (CacheFloorShare) leave; the expert cache gets
	// the rest, and the segment what the cache cannot make a slot of.
	PrefillBudgetBytes int64 `json:"prefill_budget_bytes"`
	// GoMemoryLimitBytes is the Go runtime's memory limit: every line the
	// Go heap holds (KV cache, buffer lines, prompt cache, runtime
	// reserve). Resident
	// weights (an arena or the mapped shards) and expert slabs live
	// outside the heap.
	GoMemoryLimitBytes int64 `json:"go_memory_limit_bytes"`
	WorkingSlots       int   `json:"working_slots"`
	MTPSlots           int   `json:"mtp_slots"`

	// ExpertLayers is the number of layers with routed experts (MTP
	// included); SlotSetBytes is a slot set, one cache slot in each of
	// them: the expert cache comes in whole slot sets.
	ExpertLayers       int   `json:"expert_layers"`
	ExpertsPerLayer    int   `json:"experts_per_layer"`
	SlotSetBytes       int64 `json:"slot_row_bytes"`
	CacheSlotsPerLayer int   `json:"cache_slots_per_layer"`
	ExpertCacheBytes   int64 `json:"expert_cache_bytes"`
	// PromptCacheBytes is the prompt cache's memory tier cap (0 without
	// a prompt cache or a memory tier).
	PromptCacheBytes int64 `json:"prompt_cache_bytes"`

	Items []Item `json:"items"`
	// GPU is the GPU backend's lines for the prefill segment, when prefill
	// runs on a GPU (Options.GPU).
	GPU *GPUPlan `json:"gpu,omitempty"`

	// Problem and Suggestion explain a plan that does not fit.
	Problem    string `json:"problem,omitempty"`
	Suggestion string `json:"suggestion,omitempty"`

	osDefault bool // OSReserveBytes follows DefaultOSReserve
}

// FitError refuses a plan that does not fit; its message carries the
// table and the suggestion.
type FitError struct{ Plan *Plan }

func (e *FitError) Error() string {
	p := e.Plan
	msg := "plan: the model does not fit: " + p.Problem + "\n" + p.Table()
	if p.Suggestion != "" {
		msg += "\n" + p.Suggestion
	}
	return msg
}

// AllExpertsCached reports whether the expert cache holds every routed
// expert, so nothing needs to stream from disk after the first use.
func (p *Plan) AllExpertsCached() bool {
	return p.Fits && p.CacheSlotsPerLayer >= p.ExpertsPerLayer
}

// Err returns a *FitError when the plan does not fit, else nil.
func (p *Plan) Err() error {
	if p.Fits {
		return nil
	}
	return &FitError{Plan: p}
}

// Item returns the named line item.
func (p *Plan) Item(name string) (Item, bool) {
	for _, it := range p.Items {
		if it.Name == name {
			return it, true
		}
	}
	return Item{}, false
}

// New lays out the equation for running the model of cfg, whose weights
// are w, with opts. A plan that does not fit is returned with Fits false
// (see Err) and a suggestion; the error is for invalid input only.
func New(cfg *config.Config, w Weights, opts Options) (*Plan, error) {
	p, err := build(cfg, w, opts)
	if err != nil {
		return p, err
	}
	if p.Fits {
		return p.fitSegment(cfg, w, opts), nil
	}
	p.Suggestion = p.suggest(cfg, w, opts)
	return p, nil
}

// fitSegment gives the segment the budget chose (p, opts.Segment 0) what
// the expert cache cannot turn into one more whole slot per layer: the
// longest segment, up to the context, that keeps p's slots.
func (p *Plan) fitSegment(cfg *config.Config, w Weights, opts Options) *Plan {
	if opts.Segment != 0 || opts.ExpertCache != 0 || p.ExpertLayers == 0 || p.PrefillSegment >= p.Context {
		return p
	}
	with := func(segment int) *Plan {
		o := opts
		o.Segment = segment
		q, err := build(cfg, w, o)
		if err != nil || !q.Fits || q.CacheSlotsPerLayer < p.CacheSlotsPerLayer || (q.GPU != nil && !q.GPU.Fits && p.GPU.Fits) {
			return nil
		}
		q.PrefillBudgetBytes = p.PrefillBudgetBytes
		return q
	}
	lo, hi := p.PrefillSegment, p.Context
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if with(mid) != nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == p.PrefillSegment {
		return p
	}
	return with(lo)
}

// build lays out the equation without a suggestion.
func build(cfg *config.Config, w Weights, opts Options) (*Plan, error) {
	if cfg == nil {
		return nil, errors.New("plan: no config")
	}
	if err := opts.check(cfg); err != nil {
		return nil, err
	}
	p := &Plan{
		Source:              w.Source,
		ResidentWeightBytes: w.ResidentBytes - w.EmbeddingBytes,
		RoutedBytes:         w.RoutedBytes,
		Context:             orDefault(opts.Context, DefaultContext),
		Sequences:           orDefault(opts.Sequences, 1),
		Threads:             orDefault(opts.Threads, DefaultThreads),
		ExpertLayers:        len(w.Layers),
		ExpertsPerLayer:     cfg.NumRoutedExperts,
	}
	mem := opts.Memory
	if mem == 0 {
		if opts.MachineMemory == nil {
			return nil, errors.New("plan: no memory budget given and no way to ask the machine")
		}
		var err error
		if mem, err = opts.MachineMemory(); err != nil {
			return nil, fmt.Errorf("plan: machine memory: %w", err)
		}
		if mem <= 0 {
			return nil, fmt.Errorf("plan: machine memory reported as %d bytes", mem)
		}
	}
	p.MemoryBytes = mem
	p.OSReserveBytes = opts.OSReserve
	if p.OSReserveBytes == 0 {
		p.OSReserveBytes = DefaultOSReserve(mem)
		p.osDefault = true
	}
	p.MemoryLimitBytes = mem - p.OSReserveBytes

	p.ExpertSlotBytes = SlotBytes(w.MainExpertBytes())
	p.MTPSlotBytes = SlotBytes(w.MTPExpertBytes())
	for _, l := range w.Layers {
		p.SlotSetBytes += SlotBytes(l.ExpertBytes)
	}
	E, k := cfg.NumRoutedExperts, cfg.ExpertsPerToken
	p.WorkingSlots = opts.WorkingSlots
	if p.WorkingSlots == 0 {
		// The streamed tier recycles a working slot as soon as the model is
		// done with the expert in it, so a forward of any size streams its
		// misses through two experts_per_tok worth of slots.
		p.WorkingSlots = min(E, 2*k)
	}
	if p.MTPSlotBytes > 0 {
		p.MTPSlots = min(E, k*p.Sequences)
	}
	geo := kvGeometry(cfg, w)
	geo.BF16 = opts.KVBF16
	p.KVBytesPerToken = geo.BytesPerToken()
	p.KVCache = kvType(opts.KVBF16)
	p.KVBytes = int64(p.Sequences) * int64(p.Context) * p.KVBytesPerToken
	runtime := orDefault(opts.RuntimeReserve, DefaultRuntimeReserve)

	p.Items = []Item{{ItemResident, p.ResidentWeightBytes, residentDetail(w)}}
	if w.EmbeddingBytes > 0 {
		p.EmbeddingRows = min(EmbeddingCacheRows, cfg.VocabSize)
		p.Items = append(p.Items, Item{ItemEmbedding, EmbeddingCacheBytes(cfg, w, p.EmbeddingRows), fmt.Sprintf("%d of the embedding table's %d rows (%s each), read on demand (a token needs one row; the table is %s)", p.EmbeddingRows, cfg.VocabSize, bytesize.IEC(w.EmbeddingBytes/int64(cfg.VocabSize)), bytesize.IEC(w.EmbeddingBytes))})
	}
	p.Items = append(p.Items,
		Item{ItemWorking, int64(p.WorkingSlots) * p.ExpertSlotBytes, fmt.Sprintf("%d slots x %s: misses of one layer stream through them, each slot recycled once its expert is applied (2 x experts_per_tok %d)", p.WorkingSlots, bytesize.IEC(p.ExpertSlotBytes), k)},
	)
	if p.MTPSlots > 0 {
		p.Items = append(p.Items, Item{ItemMTPBank, int64(p.MTPSlots) * p.MTPSlotBytes, fmt.Sprintf("%d slots x %s: the MTP layer's experts for one draft row per sequence, min(%d, %d x %d)", p.MTPSlots, bytesize.IEC(p.MTPSlotBytes), E, k, p.Sequences)})
	}
	p.Items = append(p.Items,
		Item{ItemKV, p.KVBytes, fmt.Sprintf("%d sequence(s) x %d tokens x %d bytes per token (compressed MLA latent and rope key of %d layers%s, %s)", p.Sequences, p.Context, p.KVBytesPerToken, kvLayers(geo), dsaNote(geo), kvType(opts.KVBF16))},
		Item{ItemRuntime, runtime, "Go runtime and collector headroom, stacks, tokenizer, chat template, server, read queues, binary and libraries"},
		checksumItem(w),
	)
	p.Items = append(p.Items, gpuFixedItems(cfg, w, opts.GPU)...)
	var fixed int64
	for _, it := range p.Items {
		fixed += it.Bytes
	}
	buffers := p.sizeBuffers(cfg, w, opts.Segment, opts.GPU, fixed)
	for _, it := range buffers {
		fixed += it.Bytes
	}
	p.Items = append(p.Items, buffers...)
	heap := buffers
	if opts.PromptCache != nil {
		prompt := p.promptCacheItems(*opts.PromptCache, fixed)
		for _, it := range prompt {
			fixed += it.Bytes
		}
		p.Items = append(p.Items, prompt...)
		heap = append(slices.Clip(heap), prompt...)
	}
	p.size(fixed, opts.ExpertCache)
	p.Items = append(p.Items, Item{ItemCache, p.ExpertCacheBytes, p.cacheDetail(w)})
	p.PlannedProcessBytes = fixed + p.ExpertCacheBytes
	p.GoMemoryLimitBytes = p.KVBytes + runtime + checksumItem(w).Bytes
	if it, ok := p.Item(ItemEmbedding); ok {
		p.GoMemoryLimitBytes += it.Bytes
	}
	for _, it := range heap {
		if !gpuItem(it.Name) { // the GPU's memory is the driver's, not the Go heap
			p.GoMemoryLimitBytes += it.Bytes
		}
	}
	return p, nil
}

// CheckPrompt refuses, before any work, a prompt of n tokens that the
// plan's KV cache line cannot hold.
func (p *Plan) CheckPrompt(n int) error {
	if n > p.Context {
		return fmt.Errorf("plan: a prompt of %d tokens does not fit the %s line (%d tokens per sequence); raise --context (the model allows more) or shorten the prompt", n, ItemKV, p.Context)
	}
	return nil
}

// limitText says what the process may use: the limit, or, when the OS
// reserve takes the whole budget, that nothing is left.
func (p *Plan) limitText() string {
	if p.MemoryLimitBytes <= 0 {
		return fmt.Sprintf("nothing is left: the OS reserve of %s takes the whole %s budget", bytesize.IEC(p.OSReserveBytes), bytesize.IEC(p.MemoryBytes))
	}
	return "the limit is " + bytesize.IEC(p.MemoryLimitBytes)
}

// size decides the cache slots per expert layer from what fixed leaves.
func (p *Plan) size(fixed, requested int64) {
	avail := p.MemoryLimitBytes - fixed
	if p.ExpertLayers == 0 {
		p.Fits = avail >= 0
		if !p.Fits {
			p.Problem = fmt.Sprintf("the fixed items need %s but %s", bytesize.IEC(fixed), p.limitText())
		}
		return
	}
	slots := int64(0)
	if avail > 0 {
		slots = avail / p.SlotSetBytes
	}
	if requested > 0 {
		want := requested / p.SlotSetBytes
		if want < 1 {
			p.Problem = fmt.Sprintf("an expert cache of %s holds less than one slot in each of the %d expert layers (%s)", bytesize.IEC(requested), p.ExpertLayers, bytesize.IEC(p.SlotSetBytes))
			return
		}
		if want > slots {
			p.CacheSlotsPerLayer = int(min(want, int64(p.ExpertsPerLayer)))
			p.ExpertCacheBytes = int64(p.CacheSlotsPerLayer) * p.SlotSetBytes
			p.Problem = fmt.Sprintf("an expert cache of %d slots per layer (%s) plus the fixed items (%s) exceeds the limit of %s", p.CacheSlotsPerLayer, bytesize.IEC(p.ExpertCacheBytes), bytesize.IEC(fixed), bytesize.IEC(p.MemoryLimitBytes))
			return
		}
		slots = want
	}
	slots = min(slots, int64(p.ExpertsPerLayer))
	p.CacheSlotsPerLayer = int(slots)
	p.ExpertCacheBytes = slots * p.SlotSetBytes
	if slots < 1 {
		p.Problem = fmt.Sprintf("not even one expert cache slot per expert layer fits: the fixed items need %s, %s, one slot in each of the %d expert layers needs %s more", bytesize.IEC(fixed), p.limitText(), p.ExpertLayers, bytesize.IEC(p.SlotSetBytes))
		return
	}
	p.Fits = true
}

func (p *Plan) cacheDetail(w Weights) string {
	if p.ExpertLayers == 0 {
		return "no routed experts"
	}
	pct := 100 * float64(p.CacheSlotsPerLayer) / float64(max(1, p.ExpertsPerLayer))
	d := fmt.Sprintf("%d slots in each of %d expert layers (%.1f%% of the experts), %s per slot set", p.CacheSlotsPerLayer, p.ExpertLayers, pct, bytesize.IEC(p.SlotSetBytes))
	if w.MTP {
		d += " (MTP slot included)"
	}
	return d
}

func (o *Options) check(cfg *config.Config) error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"memory", o.Memory}, {"context", int64(o.Context)}, {"sequences", int64(o.Sequences)},
		{"segment", int64(o.Segment)}, {"threads", int64(o.Threads)}, {"working slots", int64(o.WorkingSlots)},
		{"expert cache", o.ExpertCache}, {"runtime reserve", o.RuntimeReserve}, {"OS reserve", o.OSReserve},
	} {
		if f.v < 0 {
			return fmt.Errorf("plan: %s = %d must not be negative", f.name, f.v)
		}
	}
	if o.Context > cfg.MaxPositionEmbeddings {
		return fmt.Errorf("plan: context %d exceeds the model's max_position_embeddings %d", o.Context, cfg.MaxPositionEmbeddings)
	}
	if o.Sequences > 1024 {
		return fmt.Errorf("plan: %d sequences is more than the 1024 supported", o.Sequences)
	}
	if o.Memory > 0 && o.OSReserve >= o.Memory {
		return fmt.Errorf("plan: OS reserve %d is not below the memory %d", o.OSReserve, o.Memory)
	}
	return nil
}

// kvGeometry is what one token of a sequence stores with these weights.
func kvGeometry(cfg *config.Config, w Weights) kvcache.Geometry {
	g := kvcache.Geometry{Layers: cfg.NumLayers, KVLora: cfg.KVLoraRank, Rope: cfg.QKRopeHeadDim, MTP: w.MTP}
	if w.DSA {
		g.IndexDim = cfg.IndexHeadDim
		g.Indexer = make([]bool, cfg.NumLayers)
		for _, l := range cfg.FullIndexerLayers() {
			g.Indexer[l] = true
		}
	}
	return g
}

// KVBF16 reports whether the plan's KV cache is bfloat16.
func (p *Plan) KVBF16() bool { return p.KVCache == kvType(true) }

// kvType names the KV cache's type.
func kvType(bf16 bool) string {
	if bf16 {
		return "bfloat16"
	}
	return "float32"
}

func kvLayers(g kvcache.Geometry) int {
	if g.MTP {
		return g.Layers + 1
	}
	return g.Layers
}

func dsaNote(g kvcache.Geometry) string {
	n := 0
	for _, b := range g.Indexer {
		if b {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", indexer keys of %d full layers", n)
}

func residentDetail(w Weights) string {
	if w.EmbeddingBytes > 0 {
		return "every non-routed tensor but the embedding table, read once into memory outside the Go heap: lm_head, attention, norms, dense MLPs, routers and shared experts" + mtpNote(w)
	}
	return "every non-routed tensor, read once into memory outside the Go heap: embedding, lm_head, attention, norms, dense MLPs, routers and shared experts" + mtpNote(w)
}

// EmbeddingCacheRows is the rows of the embedding table the engine keeps
// (model.Options.EmbeddingRows): the tokens of a chat's vocabulary in
// use. A miss reads one row (6 KB for GLM-5.2) from the container.
const EmbeddingCacheRows = 2048

// EmbeddingSlotOverhead bounds what a cached embedding row takes beside
// its bytes: its one-row matrix header, token and reference bit.
const EmbeddingSlotOverhead = 128

// EmbeddingCacheBytes is the memory of a cache of rows embedding rows:
// the rows and their bookkeeping, and a slot index over the vocabulary.
func EmbeddingCacheBytes(cfg *config.Config, w Weights, rows int) int64 {
	rowBytes := w.EmbeddingBytes / int64(cfg.VocabSize)
	return int64(rows)*(rowBytes+EmbeddingSlotOverhead) + 4*int64(cfg.VocabSize)
}

func mtpNote(w Weights) string {
	if w.MTP {
		return ", the MTP layer's dense part"
	}
	return ""
}

func orDefault[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// checksumExtents bounds the extents of one routed expert (its three
// weight tensors and three scale tensors, when none are adjacent), and
// checksumEntryBytes what one extent's checksum takes: the container's
// table (container.ChecksumBytes) and the streamed tier's copy beside
// the extent's read.
const (
	checksumExtents    = 6
	checksumEntryBytes = 24 + 8
)

// checksumItem is the memory of the routed experts' checksums, which the
// weights' fingerprint takes and every expert read is checked against.
func checksumItem(w Weights) Item {
	experts := 0
	for _, l := range w.Layers {
		experts += l.Experts
	}
	return Item{ItemChecksums, int64(experts) * checksumExtents * checksumEntryBytes,
		fmt.Sprintf("%d routed experts x up to %d extents x %d bytes: the CRC-32C every expert read is checked against", experts, checksumExtents, checksumEntryBytes)}
}
