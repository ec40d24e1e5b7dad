package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/native/diskio"
)

// StreamResult is the result of spool bench stream.
type StreamResult struct {
	Model            string  `json:"model"`
	MemoryBytes      int64   `json:"memory_bytes"`
	CacheBytes       int64   `json:"cache_bytes"`
	LRUSlotsPerLayer int     `json:"lru_slots_per_layer"`
	CachedFraction   float64 `json:"cached_fraction"`
	WorkingSlots     int     `json:"working_slots"`
	Workers          int     `json:"workers"`
	ExpertLayers     int     `json:"expert_layers"`
	ExpertsPerLayer  int     `json:"experts_per_layer"`
	DirectIO         bool    `json:"direct_io"`
	ReadChunkBytes   int64   `json:"read_chunk_bytes"`

	Tokens int `json:"tokens"`
	// TokenIDs are the tokens decoded: equal across runs that read the
	// same model raw, from packs, with any decode loop.
	TokenIDs        []int   `json:"token_ids"`
	Seconds         float64 `json:"seconds"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	HitRate         float64 `json:"hit_rate"`
	// MissBytesPerToken is what a decoded token's forwards read from
	// storage, as they recorded it (generate.Result.DecodeExpertBytes):
	// read-aheads nobody used are not in it.
	MissBytesPerToken float64 `json:"miss_bytes_per_token"`
	// StreamBytesPerSecond is the bytes the tier read per decode second,
	// every read (and read-ahead) counted.
	StreamBytesPerSecond float64 `json:"stream_bytes_per_second"`
	// WaitShare is the share of decode wall time spent waiting for reads.
	WaitShare float64 `json:"wait_share"`
	// DiskBusyShare is the share of decode wall time with at least one
	// read being served; MeanReadDepth the mean number being served over
	// the decode (the probe keeps every worker busy).
	DiskBusyShare float64 `json:"disk_busy_share"`
	MeanReadDepth float64 `json:"mean_read_depth"`
	// PackedExperts is the experts read from packs (spool pack);
	// DecodeBytesPerSecond their rebuilt bytes over the time spent
	// decoding them (one core's rate: each record decodes on one read
	// worker); DecodeShare that time over the decode's wall time.
	PackedExperts        int64    `json:"packed_experts"`
	DecodeLoop           string   `json:"decode_loop,omitempty"`
	DecodeBytesPerSecond float64  `json:"decode_bytes_per_second"`
	DecodeShare          float64  `json:"decode_share"`
	PackNotes            []string `json:"pack_notes,omitempty"`
	// Unpack measures, after the decode and when packs were read, every
	// decode loop on one core over a sample of the packed experts: rebuilt
	// bytes/s, over memcpy and over the disk's rebuilt bytes/s.
	Unpack *UnpackResult `json:"unpack,omitempty"`
	// Prefetched counts experts read ahead, PrefetchHits those then
	// asked for; PrefetchRecall is PrefetchHits over the misses.
	// PinnedExperts is the pinned tier at the end, Repins the live
	// re-pinning swaps during the decode.
	PinnedExperts  int     `json:"pinned_experts"`
	Repins         int     `json:"repins"`
	Prefetched     int64   `json:"prefetched"`
	PrefetchHits   int64   `json:"prefetch_hits"`
	PrefetchRecall float64 `json:"prefetch_recall"`

	// DiskBytesPerSecond is the read probe's rate: decoding's access
	// pattern (whole experts at random, chunked direct reads at the read
	// pool's queue depth) with nothing else running; the mean of a probe
	// before and one after the decode.
	DiskBytesPerSecond float64 `json:"disk_bytes_per_second"`
	// DiskProbeSpread is |before - after| / mean of the two probes.
	DiskProbeSpread        float64 `json:"disk_probe_spread"`
	DiskProbeBytes         int64   `json:"disk_probe_bytes"`
	DiskProbeDirect        bool    `json:"disk_probe_direct"`
	DiskProbeQueueDepth    int     `json:"disk_probe_queue_depth"`
	CeilingTokensPerSecond float64 `json:"ceiling_tokens_per_second"`
	// Ratio is TokensPerSecond / CeilingTokensPerSecond.
	Ratio float64 `json:"ratio"`
}

// Stream runs spool bench stream on the model in dir: a decode of tokens
// with the experts streamed through so's tier in the memory mem plans,
// between two disk probes of probeBytes each.
func Stream(ctx context.Context, dir string, mem *host.Memory, tokens int, speculate bool, so experts.StreamOptions, probeBytes int64, seed uint64) (*StreamResult, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	const promptLen = 4
	if so.Trace != nil {
		so.Trace.Layers, so.Trace.Experts = cfg.NumLayers, cfg.NumRoutedExperts
	}
	if so.WorkingSlots == 0 {
		so.WorkingSlots = 2 * cfg.ExpertsPerToken
	}
	e, err := host.Open(ctx, host.Config{
		ModelDir: dir, Memory: *mem, Context: promptLen + tokens + 8, MaxBatch: 1, NoMTP: !speculate,
		PromptCache: host.PromptCache{Off: true}, GPU: host.GPUOff, NoScheduler: true,
		TunePlan: func(_ *config.Config, _ plan.Weights, o *plan.Options) error {
			o.Segment, o.WorkingSlots = promptLen, so.WorkingSlots
			return nil
		},
		Stream: func(p *plan.Plan) experts.StreamOptions {
			so.CacheBytes, so.WorkingSlots = p.ExpertCacheBytes, p.WorkingSlots
			if so.PinnedBytes < 0 {
				so.PinnedBytes = so.CacheBytes / 2
			}
			so.PinnedBytes = min(so.PinnedBytes, so.CacheBytes)
			return so
		},
	}, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close() // and the tier
	p, src := e.Plan, e.Experts

	before, err := src.ProbeReads(ctx, probeBytes, seed)
	if err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = rng.IntN(cfg.VocabSize)
	}
	m := e.Model.Dir.Model
	var start time.Time
	var activity diskio.Activity
	first := true
	res, err := generate.Generate(ctx, m, m.NewSequence(p.Context), prompt, generate.Params{MaxTokens: tokens, Speculative: speculate}, func(int) error {
		if first {
			first = false
			src.ResetTurn()
			start = time.Now()
			activity = src.ReadPool().Activity()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wall := time.Since(start).Seconds()
	activity = src.ReadPool().Activity().Sub(activity)
	st := src.Stats()
	after, err := src.ProbeReads(ctx, probeBytes, seed+1)
	if err != nil {
		return nil, err
	}
	bw := (before.BytesPerSecond + after.BytesPerSecond) / 2
	r := &StreamResult{
		Model: dir, MemoryBytes: p.MemoryBytes, CacheBytes: p.ExpertCacheBytes,
		WorkingSlots: st.WorkingSlots, Workers: src.ReadPool().Workers(),
		ExpertLayers: len(st.Layers), ExpertsPerLayer: cfg.NumRoutedExperts, DirectIO: src.Direct(), ReadChunkBytes: so.ReadChunk,
		Tokens: len(res.Tokens), TokenIDs: res.Tokens, Seconds: wall, HitRate: st.Turn.HitRate(),
		DiskBytesPerSecond: bw, DiskProbeBytes: before.Bytes + after.Bytes, DiskProbeDirect: before.Direct && after.Direct,
		DiskProbeQueueDepth: before.Workers,
	}
	if bw > 0 {
		r.DiskProbeSpread = math.Abs(before.BytesPerSecond-after.BytesPerSecond) / bw
	}
	if len(st.Layers) > 0 {
		r.LRUSlotsPerLayer = st.LRUSlots / len(st.Layers)
		r.CachedFraction = float64(st.LRUSlots+st.Pinned) / float64(len(st.Layers)*cfg.NumRoutedExperts)
	}
	decoded := len(res.Tokens) - 1 // the first token comes from the prefill
	if decoded > 0 && wall > 0 {
		r.TokensPerSecond = float64(decoded) / wall
		r.MissBytesPerToken = float64(res.DecodeExpertBytes) / float64(decoded)
		r.StreamBytesPerSecond = float64(st.Turn.BytesRead) / wall
		r.WaitShare = st.Turn.Wait.Seconds() / wall
		r.DiskBusyShare = activity.Busy.Seconds() / wall
		r.MeanReadDepth = activity.Depth.Seconds() / wall
		r.DecodeShare = st.Turn.DecodeTime.Seconds() / wall
	}
	r.PackedExperts, r.PackNotes = st.Turn.Unpacked, src.PackNotes()
	if r.PackedExperts > 0 {
		r.DecodeLoop = so.DecodeLoop.String()
	}
	r.Prefetched, r.PrefetchHits = st.Turn.Prefetched, st.Turn.PrefetchHits
	r.PinnedExperts, r.Repins = st.Pinned, st.Repins
	if st.Turn.Misses > 0 {
		r.PrefetchRecall = float64(st.Turn.PrefetchHits) / float64(st.Turn.Misses)
	}
	if st.Turn.DecodeTime > 0 {
		r.DecodeBytesPerSecond = float64(st.Turn.Decoded) / st.Turn.DecodeTime.Seconds()
	}
	if r.MissBytesPerToken > 0 {
		r.CeilingTokensPerSecond = r.DiskBytesPerSecond / r.MissBytesPerToken
		r.Ratio = r.TokensPerSecond / r.CeilingTokensPerSecond
	}
	if r.PackedExperts > 0 {
		recs, err := PackedRecords(dir, 4)
		if err != nil {
			return nil, err
		}
		u, err := Unpack(ctx, recs, UnpackOptions{DiskBytesPerSecond: bw})
		if err != nil {
			return nil, err
		}
		r.Unpack = &u
	}
	return r, nil
}
