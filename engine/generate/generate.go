package generate

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
)

// Result describes a generation.
type Result struct {
	Tokens       []int
	StopToken    int // -1 unless a stop token ended generation
	FinishReason string
	PromptTokens int
	// CachedTokens is how many prompt tokens were not forwarded: held by
	// the sequence (a common prefix) or restored from the prompt cache.
	CachedTokens int
	// RestoredTokens is the part of CachedTokens restored from the prompt
	// cache, in RestoreTime (which PrefillTime includes).
	RestoredTokens int
	RestoreTime    time.Duration
	// CacheCreationTokens is the prompt tokens past CachedTokens whose
	// blocks the generation added to the prompt cache.
	CacheCreationTokens int
	PrefillTime         time.Duration // start to the first token
	DecodeTime          time.Duration // first token to the end
	// DecodeTokens counts tokens forwarded after the prefill.
	DecodeTokens int
	// DraftsProposed and DraftsAccepted count MTP speculation.
	DraftsProposed int
	DraftsAccepted int
	// Drafting reports, for a speculative generation, what its lone decode
	// steps cost with drafting and without and what the gate chose (nil
	// otherwise).
	Drafting *draftgate.Report

	// PrefillChunks counts the prompt chunks forwarded.
	PrefillChunks int
	// PrefillExpertsTouched counts the distinct (layer, expert) pairs the
	// prefill's forwards acquired, the MTP layer's included.
	PrefillExpertsTouched int
	// PrefillExpertsByLayer counts them by expert layer (model.ExpertLayers
	// order; 0 for a layer the prefill did not route through).
	PrefillExpertsByLayer []int
	// PrefillExpertBytes and DecodeExpertBytes are the routed-expert bytes
	// read from storage by the forwards that carried this generation's
	// prompt chunks and its decode rows (shared forwards count in full for
	// each of their sequences).
	PrefillExpertBytes int64
	DecodeExpertBytes  int64
	// PrefillExpertsRead and DecodeExpertsRead count the experts those
	// forwards read from storage (counted as their bytes are).
	PrefillExpertsRead int
	DecodeExpertsRead  int

	// Embedding is an embedding's vector (Params.Embed): HiddenSize
	// values of unit L2 norm.
	Embedding []float32
}

// ExpertsTouchedPerLayer is the mean of PrefillExpertsByLayer over the
// expert layers the prefill routed through: how widely the prompt spread
// over each layer's experts (a trained model's prompt of a few hundred
// tokens reaches nearly all of them; 0 without routed layers).
func (r *Result) ExpertsTouchedPerLayer() float64 {
	sum, layers := 0, 0
	for _, n := range r.PrefillExpertsByLayer {
		if n > 0 {
			sum += n
			layers++
		}
	}
	if layers == 0 {
		return 0
	}
	return float64(sum) / float64(layers)
}

// DecodeTokensPerSecond is the decode throughput: tokens generated after
// the first (which comes from the prefill) per second of decoding.
func (r *Result) DecodeTokensPerSecond() float64 {
	if r.DecodeTime <= 0 || len(r.Tokens) < 2 {
		return 0
	}
	return float64(len(r.Tokens)-1) / r.DecodeTime.Seconds()
}

// Generate continues seq with prompt and samples up to p.MaxTokens tokens,
// calling onToken (may be nil) for each one; an error from onToken stops
// generation and is returned with the result so far. It drives one Decoder
// alone in a runner of its own, speculating when p.Speculative (every step
// alone, drafting those p.Gate lets draft).
func Generate(ctx context.Context, m *model.Model, seq *kvcache.Sequence, prompt []int, p Params, onToken func(id int) error) (*Result, error) {
	var emit func(Token) error
	if onToken != nil {
		emit = func(t Token) error { return onToken(t.ID) }
	}
	r := m.NewRunner()
	d, err := NewDecoder(r, seq, prompt, p, emit)
	if err != nil {
		return nil, err
	}
	if err := d.Restore(ctx); err != nil {
		d.Finish(ctx)
		return d.Result(), err
	}
	for !d.Done() {
		phase := "decode"
		if d.Prefilling() {
			phase = "prefill"
		}
		req, err := d.Next(ctx, true)
		if err != nil {
			d.Finish(ctx)
			return d.Result(), err
		}
		outs, cost, err := Forward(ctx, r, []model.Request{req})
		if err != nil {
			d.Finish(ctx)
			return d.Result(), fmt.Errorf("generate: %s: %w", phase, err)
		}
		if err := d.Consume(ctx, outs[0], cost); err != nil {
			d.Finish(ctx)
			return d.Result(), err
		}
	}
	d.Finish(ctx)
	return d.Result(), nil
}
