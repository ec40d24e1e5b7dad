package host

import (
	"io"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/plan"
)

// Config is the engine Open builds.
type Config struct {
	ModelDir string
	Memory   Memory
	// Context is each sequence's token limit (default plan.DefaultContext,
	// at most the model's); MaxBatch the sequences decoded together
	// (default scheduler.DefaultMaxBatch).
	Context  int
	MaxBatch int
	// MaxQueue bounds requests waiting for a slot (0: the scheduler's default).
	MaxQueue int
	// IdleSequences is the finished sequences kept for prefix reuse (0:
	// the scheduler's default; negative: none).
	IdleSequences int
	NoMTP         bool
	NoDSA         bool
	// ComputeAllKeys makes DSA layers compute every key (the baseline
	// spool bench prefill measures sparse attention against).
	ComputeAllKeys bool
	// UsageDir is where routed-expert usage histories are kept, one per
	// model identity (UsageFile; "" keeps none).
	UsageDir string
	// PromptCache is the prompt cache's disk tier (or off); the plan sizes
	// its memory tier.
	PromptCache PromptCache
	// GPU is the --gpu mode ("" is auto); CopyExperts makes the device copy
	// routed experts into its bank even where it could use them in place
	// (to measure the copies).
	GPU            string
	GPUCopyExperts bool
	// Log hears the GPU's lines (default: the log package's writer).
	Log io.Writer

	// ResidentWhenCached loads the routed experts resident when the
	// plan's expert cache holds them all (spool run without --stream);
	// otherwise they always stream from disk through the expert tier.
	ResidentWhenCached bool
	// Stream, when set, gives the streamed tier's options for the plan
	// (the benchmarks' tiers); nil is the engine's own: the plan's cache,
	// half of it pinned from the usage history and re-pinned live.
	Stream func(*plan.Plan) experts.StreamOptions
	// TunePlan, when set, adjusts the plan's options (the benchmarks'
	// chunk rows and cache slots) before the plan is made.
	TunePlan func(*config.Config, plan.Weights, *plan.Options) error
	// Check, when set, runs once the files are open and the memory
	// planned, before any weight is read (spool run measures its prompt
	// against the plan here).
	Check func(*LoadedModel, *plan.Plan) error
	// NoScheduler leaves the scheduler (and its forward buffers) out: the
	// caller generates on the model itself (spool run, the benchmarks).
	NoScheduler bool
	// WatchPressure lets the expert cache and the prompt cache's memory
	// tier give way under the system's memory pressure while the engine
	// is open (engine/pressure): a serving engine's.
	WatchPressure bool
}
