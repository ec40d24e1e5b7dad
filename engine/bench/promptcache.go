package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
)

// PromptCacheResult is the result of spool bench prompt-cache.
type PromptCacheResult struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	TurnTokens   int    `json:"turn_tokens"`
	BlockTokens  int    `json:"block_tokens"`
	BlockBytes   int64  `json:"block_bytes"`
	// StreamEveryForward: the expert cache held one slot per layer, so
	// every forward read its routed experts from disk (--stream).
	StreamEveryForward bool  `json:"stream_every_forward"`
	ExpertCacheBytes   int64 `json:"expert_cache_bytes"`
	MemoryTierBytes    int64 `json:"memory_tier_bytes"`

	// Time to first token of the prompt with nothing cached, and of the
	// prompt plus one more turn with the prompt's blocks restored from the
	// memory tier, then (after a restart of the engine) from disk.
	ColdTTFTSeconds       float64 `json:"cold_ttft_seconds"`
	WarmMemoryTTFTSeconds float64 `json:"warm_memory_ttft_seconds"`
	WarmDiskTTFTSeconds   float64 `json:"warm_disk_ttft_seconds"`
	// Ratios: cold over warm.
	MemorySpeedup float64 `json:"memory_speedup"`
	DiskSpeedup   float64 `json:"disk_speedup"`

	MemoryCachedTokens    int     `json:"memory_cached_tokens"`
	DiskCachedTokens      int     `json:"disk_cached_tokens"`
	MemoryRestoreSeconds  float64 `json:"memory_restore_seconds"`
	DiskRestoreSeconds    float64 `json:"disk_restore_seconds"`
	DiskReadBytes         int64   `json:"disk_read_bytes"`
	DiskReadBytesPerSec   float64 `json:"disk_read_bytes_per_second"`
	SpillSeconds          float64 `json:"spill_seconds"`
	DiskWrittenBytes      int64   `json:"disk_written_bytes"`
	ColdPrefillTokensPerS float64 `json:"cold_prefill_tokens_per_second"`
}

// PromptCache runs spool bench prompt-cache on the model modelFlag names
// (host.ResolveModelDir): the prompt's first token cold, then restored
// from the memory tier and from the disk tier in dir ("" a temporary one),
// each warm request adding turn tokens. build names the numerics in the
// cache's identity.
func PromptCache(ctx context.Context, modelFlag string, mem host.Memory, stream bool, tokens, turn int, dir string, seed uint64, build string) (*PromptCacheResult, error) {
	path, err := host.ResolveModelDir(modelFlag)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spool-bench-prompt-cache-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	cfg := host.Config{
		ModelDir: path, Memory: mem, Context: tokens + turn + 8, MaxBatch: 1, IdleSequences: -1,
		PromptCache: host.PromptCache{Dir: dir, DiskBytes: promptcache.DefaultDiskBytes(dir), Build: build},
	}
	pv, err := host.PreviewOpen(host.Config{ModelDir: path, Memory: mem, Context: cfg.Context, MaxBatch: 1, PromptCache: cfg.PromptCache, GPU: host.GPUOff})
	if err != nil {
		return nil, err
	}
	vocab := pv.Model.VocabSize
	if cfg.Context > pv.Model.MaxPositionEmbeddings {
		return nil, fmt.Errorf("--tokens %d + --turn %d exceed the model's %d positions", tokens, turn, pv.Model.MaxPositionEmbeddings)
	}
	if stream {
		cfg.Memory.ExpertCache = strconv.FormatInt(pv.Plan.SlotSetBytes, 10)
	}

	rng := rand.New(rand.NewPCG(seed, 0x9c))
	ids := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = rng.IntN(vocab)
		}
		return out
	}
	prompt := ids(tokens)
	// Two turns, so that the blocks the second request adds do not serve
	// the third.
	turns := [2][]int{append(prompt[:len(prompt):len(prompt)], ids(turn)...), append(prompt[:len(prompt):len(prompt)], ids(turn)...)}
	warmup := [2][]int{ids(min(tokens, 512)), ids(min(tokens, 512))}
	r := &PromptCacheResult{Model: path, PromptTokens: tokens, TurnTokens: turn, StreamEveryForward: stream}

	// The first engine: cold, then warm from memory.
	e, err := startBenchEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.BlockTokens = e.PromptCache.BlockTokens()
	r.ExpertCacheBytes, r.MemoryTierBytes = e.Plan.ExpertCacheBytes, e.Plan.PromptCacheBytes
	var memRes, diskRes *scheduler.Result
	err = func() error {
		if _, _, err := e.firstToken(ctx, warmup[0]); err != nil {
			return err
		}
		cold, _, err := e.firstToken(ctx, prompt)
		if err != nil {
			return err
		}
		r.ColdTTFTSeconds = cold.Seconds()
		r.ColdPrefillTokensPerS = float64(tokens) / cold.Seconds()
		warm, res, err := e.firstToken(ctx, turns[0])
		r.WarmMemoryTTFTSeconds, memRes = warm.Seconds(), res
		return err
	}()
	// A restart: every block goes to disk, a new engine finds them there.
	t := time.Now()
	if cerr := e.stop(); err == nil {
		err = cerr
	}
	r.SpillSeconds = time.Since(t).Seconds()
	st := e.PromptCache.Stats()
	if err != nil {
		return nil, err
	}
	r.DiskWrittenBytes = st.Disk.WrittenBytes
	if st.Disk.Blocks > 0 {
		r.BlockBytes = st.Disk.Bytes / int64(st.Disk.Blocks)
	}

	if e, err = startBenchEngine(ctx, cfg); err != nil {
		return nil, err
	}
	err = func() error {
		if _, _, err := e.firstToken(ctx, warmup[1]); err != nil {
			return err
		}
		warm, res, err := e.firstToken(ctx, turns[1])
		r.WarmDiskTTFTSeconds, diskRes = warm.Seconds(), res
		return err
	}()
	st = e.PromptCache.Stats()
	if cerr := e.stop(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	r.MemoryCachedTokens, r.MemoryRestoreSeconds = memRes.CachedTokens, memRes.RestoreTime.Seconds()
	r.DiskCachedTokens, r.DiskRestoreSeconds, r.DiskReadBytes = diskRes.CachedTokens, diskRes.RestoreTime.Seconds(), st.Disk.ReadBytes
	if diskRes.RestoreTime > 0 {
		r.DiskReadBytesPerSec = float64(st.Disk.ReadBytes) / diskRes.RestoreTime.Seconds()
	}
	if r.WarmMemoryTTFTSeconds > 0 {
		r.MemorySpeedup = r.ColdTTFTSeconds / r.WarmMemoryTTFTSeconds
	}
	if r.WarmDiskTTFTSeconds > 0 {
		r.DiskSpeedup = r.ColdTTFTSeconds / r.WarmDiskTTFTSeconds
	}
	return r, nil
}

// benchEngine is an engine whose scheduler runs until stop.
type benchEngine struct {
	*host.Engine
	cancel context.CancelFunc
	done   chan struct{}
}

func startBenchEngine(ctx context.Context, cfg host.Config) (*benchEngine, error) {
	e, err := host.Open(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	if e.PromptCache == nil {
		e.Close()
		return nil, errors.New("the prompt cache is off")
	}
	runCtx, cancel := context.WithCancel(ctx)
	b := &benchEngine{Engine: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		e.Scheduler.Run(runCtx)
	}()
	return b, nil
}

// stop stops the scheduler and closes the engine (which writes the memory
// tier to disk).
func (b *benchEngine) stop() error {
	b.cancel()
	<-b.done
	return b.Close()
}

// firstToken submits prompt as the server does (speculative, stopping at
// the model's end tokens) and times submission to its first token; it
// returns the finished request's result too.
func (b *benchEngine) firstToken(ctx context.Context, prompt []int) (time.Duration, *scheduler.Result, error) {
	m := b.Scheduler.Model()
	start := time.Now()
	st, err := b.Scheduler.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 2, StopTokens: m.Config().EOSTokenIDs, Speculative: true}})
	if err != nil {
		return 0, nil, err
	}
	var ttft time.Duration
	for {
		toks, res, err := st.Next(ctx)
		if err != nil {
			return 0, nil, err
		}
		if len(toks) > 0 && ttft == 0 {
			ttft = time.Since(start)
		}
		if res != nil {
			if res.Err != nil {
				return 0, nil, res.Err
			}
			if ttft == 0 { // a stop token first: the prefill is the time to it
				ttft = time.Since(start)
			}
			return ttft, res, nil
		}
	}
}
