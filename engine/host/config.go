package host

// DefaultMaxBatch is the sequences an engine decodes together when the
// configuration does not say.
const DefaultMaxBatch = 4

// Config is the engine Open builds.
type Config struct {
	ModelDir string
	Memory   Memory
	// Context is each sequence's token limit (default plan.DefaultContext,
	// at most the model's); MaxBatch the sequences decoded together
	// (default DefaultMaxBatch).
	Context  int
	MaxBatch int
	// MaxQueue bounds requests waiting for a slot (0: the scheduler's default).
	MaxQueue int
	// IdleSequences is the finished sequences kept for prefix reuse (0:
	// the scheduler's default; negative: none).
	IdleSequences int
	NoMTP         bool
	NoDSA         bool
	// UsageDir is where routed-expert usage histories are kept, one per
	// model identity (UsageFile; "" keeps none).
	UsageDir string
	// PromptCache is the prompt cache's disk tier (or off); the plan sizes
	// its memory tier.
	PromptCache PromptCache
	// GPU is the --gpu mode ("" is auto).
	GPU string
}
