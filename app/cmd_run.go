package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
)

type runFlags struct {
	model       string
	prompt      string
	chat        string
	promptIDs   string
	maxTokens   int
	temperature float64
	topP        float64
	topK        int
	minP        float64
	seed        uint64
	context     int
	think       bool
	jsonOut     bool
	noMTP       bool
	noDSA       bool
	stream      bool
	speculative bool
	mtpGate     bool
	mem         memoryFlags
	promptCache promptCacheFlags
	gpu         gpuFlag
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Generate text from a prompt or a chat message",
		Example: `  spool run --model assets/models/glm52-demo --chat "What does the function os.path.join do?"
  spool run --prompt-ids 8171,8173,39 --max-tokens 8 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default $SPOOL_MODEL or the demo model)")
	fl.StringVar(&f.prompt, "prompt", "", "raw text prompt (no chat template)")
	fl.StringVar(&f.chat, "chat", "", "a user message, rendered with the model's chat template")
	fl.StringVar(&f.promptIDs, "prompt-ids", "", "comma-separated prompt token ids")
	fl.IntVar(&f.maxTokens, "max-tokens", 256, "most tokens to generate")
	fl.Float64Var(&f.temperature, "temperature", -1, "sampling temperature; 0 is greedy (default: the model's generation_config)")
	fl.Float64Var(&f.topP, "top-p", -1, "nucleus sampling mass (default: the model's generation_config)")
	fl.IntVar(&f.topK, "top-k", -1, "keep the K most likely tokens (default: the model's generation_config)")
	fl.Float64Var(&f.minP, "min-p", -1, "keep the tokens at least this fraction as likely as the most likely (default: the model's generation_config)")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed for sampling (default: random)")
	fl.IntVar(&f.context, "context", 4096, "context length in tokens")
	fl.BoolVar(&f.think, "think", false, "with --chat: let the model think before answering")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of streaming text")
	fl.BoolVar(&f.noMTP, "no-mtp", false, "do not load the MTP draft layer (no speculative decoding)")
	fl.BoolVar(&f.noDSA, "no-dsa", false, "dense attention even where the DSA indexer would select")
	fl.BoolVar(&f.stream, "stream", false, "stream routed experts from disk even when they all fit in memory")
	fl.BoolVar(&f.speculative, "speculative", false, "draft tokens with the MTP layer and verify them in one forward, in the steps the gate finds that cheaper (default: on when experts stream from disk, where a forward costs reads; off when the whole model is in memory, where it costs compute)")
	fl.BoolVar(&f.mtpGate, "mtp-gate", true, "draft only while drafting costs less per token than plain decoding, as measured (false: draft in every step)")
	f.mem.register(fl)
	f.promptCache.register(fl)
	f.gpu.register(fl)
	cmd.MarkFlagsMutuallyExclusive("prompt", "chat", "prompt-ids")
	cmd.MarkFlagsOneRequired("prompt", "chat", "prompt-ids")
	return cmd
}

// runResult is the --json output of spool run.
type runResult struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	// Prompt cache: the prompt tokens not forwarded (restored from the
	// prompt cache), and those whose blocks this run added to it.
	CachedTokens           int     `json:"cached_tokens"`
	CacheCreationTokens    int     `json:"cache_creation_tokens"`
	PromptCache            string  `json:"prompt_cache,omitempty"`
	CompletionTokens       int     `json:"completion_tokens"`
	TokenIDs               []int   `json:"token_ids"`
	Text                   string  `json:"text"`
	FinishReason           string  `json:"finish_reason"`
	StopToken              *int    `json:"stop_token,omitempty"`
	Seed                   uint64  `json:"seed"`
	Temperature            float64 `json:"temperature"`
	LoadSeconds            float64 `json:"load_seconds"`
	PrefillSeconds         float64 `json:"prefill_seconds"`
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeSeconds          float64 `json:"decode_seconds"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
	MTP                    bool    `json:"mtp"`
	DraftsProposed         int     `json:"mtp_drafts_proposed"`
	DraftsAccepted         int     `json:"mtp_drafts_accepted"`
	// Drafting, when speculating, says what the decode steps cost with
	// drafting and without (expert bytes and seconds per token, the
	// acceptance) and which the gate chose.
	Drafting *draftgate.Report `json:"drafting,omitempty"`
	DSA      bool              `json:"dsa"`
	Streamed bool              `json:"streamed"`
	// Prefill I/O: the segment the plan chose (the prompt tokens one
	// forward takes, layer by layer), the segments forwarded, the distinct
	// (layer, expert) pairs they acquired and the routed expert bytes read
	// from storage in prefill and in decode.
	PrefillSegment        int `json:"prefill_segment"`
	PrefillSegments       int `json:"prefill_segments"`
	PrefillExpertsTouched int `json:"prefill_experts_touched"`
	// ExpertsTouchedPerLayer is the mean distinct routed experts per
	// expert layer the prefill routed through: how widely the prompt
	// spread over each layer's experts (8 where the routers tie).
	ExpertsTouchedPerLayer float64 `json:"experts_touched_per_layer"`
	PrefillExpertBytes     int64   `json:"prefill_expert_bytes"`
	DecodeExpertBytes      int64   `json:"decode_expert_bytes"`
	// DecodeExpertBytesPerToken is DecodeExpertBytes over the tokens
	// generated after the first (which comes from the prefill).
	DecodeExpertBytesPerToken float64 `json:"decode_expert_bytes_per_token"`
	// Memory: the plan's process bytes and the process's peak resident
	// set (Linux: VmHWM; macOS: the peak resident size).
	PlannedProcessBytes int64 `json:"planned_process_bytes"`
	PeakRSSBytes        int64 `json:"peak_rss_bytes"`
	// GPU says where prefill ran and why.
	GPU host.GPUStatus `json:"gpu"`
}

func runRun(cmd *cobra.Command, f *runFlags) error {
	ctx := cmd.Context()
	dir, err := host.ResolveModelDir(f.model)
	if err != nil {
		return err
	}
	if f.maxTokens <= 0 {
		return fmt.Errorf("--max-tokens must be positive, got %d", f.maxTokens)
	}
	pc, err := f.promptCache.resolve()
	if err != nil {
		return err
	}
	// Only trouble is worth a line on a one-shot command's terminal.
	pc.Logger = newLogger(cmd.ErrOrStderr(), slog.LevelWarn)
	gpuMode, err := f.gpu.check()
	if err != nil {
		return err
	}
	loadStart := time.Now()
	// Every file is checked, the memory planned and the prompt measured
	// before any weight is read.
	var prompt []int
	e, err := host.Open(ctx, host.Config{
		ModelDir: dir, Memory: f.mem.Memory, Context: f.context, MaxBatch: 1, NoMTP: f.noMTP, NoDSA: f.noDSA,
		UsageDir: usageDir(), PromptCache: pc, GPU: gpuMode, Log: cmd.ErrOrStderr(),
		ResidentWhenCached: !f.stream, NoScheduler: true,
		Check: func(lm *host.LoadedModel, p *plan.Plan) error {
			var err error
			if prompt, err = runPrompt(f, lm, lm.Dir.Config.VocabSize); err != nil {
				return err
			}
			return p.CheckPrompt(len(prompt))
		},
	}, nil)
	if err != nil {
		return err
	}
	defer e.Close()
	lm, p, cache, cfg := e.Model, e.Plan, e.PromptCache, e.Model.Dir.Config
	streaming := e.Experts != nil
	speculate := streaming
	if cmd.Flags().Changed("speculative") {
		speculate = f.speculative
	}
	m := lm.Dir.Model
	loadTime := time.Since(loadStart)

	params := generate.Params{MaxTokens: f.maxTokens, StopTokens: cfg.EOSTokenIDs, Speculative: speculate && m.HasMTP(), PrefillChunk: p.PrefillSegment, PromptCache: cache}
	if params.Speculative {
		params.Gate = draftgate.New(draftgate.Config{Always: !f.mtpGate})
	}
	params.Sampling = generate.SamplingFor(cfg.Generation)
	if f.temperature >= 0 {
		params.Temperature = f.temperature
	}
	if f.topP >= 0 {
		params.TopP = f.topP
	}
	if f.topK >= 0 {
		params.TopK = f.topK
	}
	if f.minP >= 0 {
		params.MinP = f.minP
	}
	params.Seed = f.seed
	if !cmd.Flags().Changed("seed") {
		params.Seed = uint64(time.Now().UnixNano())
	}

	out := cmd.OutOrStdout()
	dec := lm.Tokenizer.NewStreamDecoder(true)
	var onToken func(int) error
	if !f.jsonOut {
		onToken = func(id int) error {
			_, err := fmt.Fprint(out, dec.Add(id))
			return err
		}
	}
	res, err := generate.Generate(ctx, m, m.NewSequence(p.Context), prompt, params, onToken)
	if err != nil {
		return err
	}
	if !f.jsonOut {
		fmt.Fprintln(out, dec.Flush())
		cached := ""
		if res.CachedTokens > 0 {
			cached = fmt.Sprintf(" (%d from the prompt cache)", res.CachedTokens)
		}
		drafting := ""
		if d := res.Drafting; d != nil && res.DraftsProposed > 0 {
			drafting = fmt.Sprintf("; drafts %d of %d accepted, %s chosen", res.DraftsAccepted, res.DraftsProposed, d.Choice)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "\n%d prompt tokens%s, %d generated (%s); prefill %.0f tok/s, decode %.1f tok/s%s\n",
			len(prompt), cached, len(res.Tokens), res.FinishReason, tokensPerSecond(len(prompt)-res.CachedTokens, res.PrefillTime), res.DecodeTokensPerSecond(), drafting)
		return nil
	}
	r := runResult{
		Model:                  dir,
		PromptTokens:           len(prompt),
		CachedTokens:           res.CachedTokens,
		CacheCreationTokens:    res.CacheCreationTokens,
		CompletionTokens:       len(res.Tokens),
		TokenIDs:               res.Tokens,
		Text:                   lm.Tokenizer.Decode(res.Tokens, true),
		FinishReason:           res.FinishReason,
		Seed:                   params.Seed,
		Temperature:            params.Temperature,
		LoadSeconds:            loadTime.Seconds(),
		PrefillSeconds:         res.PrefillTime.Seconds(),
		PrefillTokensPerSecond: tokensPerSecond(len(prompt)-res.CachedTokens, res.PrefillTime),
		DecodeSeconds:          res.DecodeTime.Seconds(),
		DecodeTokensPerSecond:  res.DecodeTokensPerSecond(),
		MTP:                    m.HasMTP(),
		DraftsProposed:         res.DraftsProposed,
		DraftsAccepted:         res.DraftsAccepted,
		Drafting:               res.Drafting,
		DSA:                    m.HasDSA(),
		Streamed:               streaming,
		PrefillSegment:         p.PrefillSegment,
		PrefillSegments:        res.PrefillChunks,
		PrefillExpertsTouched:  res.PrefillExpertsTouched,
		ExpertsTouchedPerLayer: res.ExpertsTouchedPerLayer(),
		PrefillExpertBytes:     res.PrefillExpertBytes,
		DecodeExpertBytes:      res.DecodeExpertBytes,
		PlannedProcessBytes:    p.PlannedProcessBytes,
		GPU:                    e.GPU.Status(),
	}
	if n := len(res.Tokens) - 1; n > 0 {
		r.DecodeExpertBytesPerToken = float64(res.DecodeExpertBytes) / float64(n)
	}
	if peak, err := peakRSS(); err == nil {
		r.PeakRSSBytes = peak
	}
	if cache != nil {
		r.PromptCache = pc.Dir
	}
	if r.TokenIDs == nil {
		r.TokenIDs = []int{}
	}
	if res.StopToken >= 0 {
		r.StopToken = &res.StopToken
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// runPrompt is the prompt of f's --prompt-ids, --prompt or --chat.
func runPrompt(f *runFlags, lm *host.LoadedModel, vocab int) ([]int, error) {
	var prompt []int
	switch {
	case f.promptIDs != "":
		var err error
		if prompt, err = parseIDs(f.promptIDs, vocab); err != nil {
			return nil, err
		}
	case f.prompt != "":
		prompt = lm.Tokenizer.Encode(f.prompt)
	default:
		if lm.Template == nil {
			return nil, fmt.Errorf("%s has no chat template; use --prompt", lm.Dir.Path)
		}
		think := f.think
		text, err := lm.Template.Render([]chat.Message{{Role: "user", Content: f.chat}}, chat.Options{AddGenerationPrompt: true, EnableThinking: &think})
		if err != nil {
			return nil, err
		}
		prompt = lm.Tokenizer.Encode(text)
	}
	if len(prompt) == 0 {
		return nil, errors.New("the prompt is empty")
	}
	return prompt, nil
}

func tokensPerSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// parseIDs parses "1,2,3" into token ids below vocab.
func parseIDs(s string, vocab int) ([]int, error) {
	var ids []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("--prompt-ids: %q is not a token id", part)
		}
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("--prompt-ids: token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
