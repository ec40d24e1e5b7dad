package generate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
)

// Cost is what one forward read from the expert source.
type Cost struct {
	// ExpertBytes is the bytes the source read from storage for the
	// forward's experts, ExpertsRead the experts it read (the runner's
	// record of the forward: model.Runner.LastCost).
	ExpertBytes int64
	ExpertsRead int
	// Experts is the routed experts the forward acquired (valid until the
	// next forward).
	Experts *model.ExpertSet
}

// Forward runs reqs through r's model in one forward and reports its cost.
func Forward(ctx context.Context, r *model.Runner, reqs []model.Request) ([]model.Output, Cost, error) {
	outs, err := r.Forward(ctx, reqs, nil)
	c := r.LastCost()
	return outs, Cost{ExpertBytes: c.Bytes, ExpertsRead: c.Experts, Experts: r.LastExperts()}, err
}

// Decoder is one sequence's generation, driven by its caller:
//
//	for !d.Done() {
//		req, err := d.Next(ctx, speculate) // a prompt chunk, or the sampled token (and an MTP draft)
//		outs, cost, err := Forward(ctx, r, []model.Request{req}) // or together with other decoders' requests
//		err = d.Consume(ctx, outs[0], cost)
//	}
//	d.Finish()
//
// The tokens depend only on the prompt, the parameters and the model: not on
// the chunk size, on speculation, or on which requests share a forward.
type Decoder struct {
	r       *model.Runner // runs the MTP layer's forwards
	m       *model.Model
	seq     *kvcache.Sequence
	prompt  []int
	p       Params
	onToken func(Token) error
	sampler *Sampler
	logits  logitProcessor
	res     Result

	prefilled int    // prompt tokens whose state is in seq
	next      int    // the sampled token not yet forwarded; -1 while prefilling
	pos       int    // position of next while its forward is in flight
	inflight  int    // rows of the request Next returned, 0 when none
	draft     int    // the MTP draft in flight, -1 when none
	row       [2]int // the decode request's tokens
	done      bool
	finished  bool

	mtp      *mtpQueue // nil without speculation
	drafting drafting  // the gate's part: lone steps measured
	restored bool      // Restore has run
	pool     []float64 // Params.Embed: the sum of the prompt's hidden states so far
	touched  model.ExpertSet
	started  time.Time
	first    time.Time // the first token was sampled
}

// NewDecoder starts generating a continuation of prompt in seq, with the
// MTP layer's forwards run by r (the runner of the main forwards). Tokens of
// prompt already cached in seq (a common prefix) are reused and the rest of
// seq is trimmed; Restore adds what the prompt cache holds beyond them; at
// least one prompt token is always forwarded. onToken (may be nil)
// receives every generated token; an error from it ends the generation and
// is returned by Consume.
func NewDecoder(r *model.Runner, seq *kvcache.Sequence, prompt []int, p Params, onToken func(Token) error) (*Decoder, error) {
	m := r.Model()
	if err := p.Validate(prompt, m.Config().VocabSize); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if len(prompt) > seq.Limit() {
		return nil, &kvcache.ContextError{Have: 0, Add: len(prompt), Limit: seq.Limit()}
	}
	if p.PrefillChunk == 0 {
		p.PrefillChunk = DefaultPrefillChunk
	}
	common := 0
	if p.Embed {
		seq.Clear()
	} else {
		common = reusePrefix(seq, prompt)
	}
	d := &Decoder{
		r: r, m: m, seq: seq, prompt: prompt, p: p, onToken: onToken,
		sampler:   NewSampler(p.Sampling),
		res:       Result{StopToken: -1, PromptTokens: len(prompt), CachedTokens: common},
		prefilled: common,
		next:      -1,
		draft:     -1,
		started:   time.Now(),
	}
	d.logits = newLogitProcessor(&d.p, m.Config().VocabSize)
	switch {
	case p.Embed:
		d.pool = make([]float64, m.Config().HiddenSize)
	case p.Speculative && m.HasMTP():
		d.mtp = newMTPQueue(m.Config().HiddenSize)
		d.drafting.use(p.Gate)
	}
	return d, nil
}

// reusePrefix keeps the longest prefix of prompt (all of it but the last
// token) that seq holds and drops the rest (kvcache's Rewind keeps the MTP
// cache's lag). It returns the prefix's length.
func reusePrefix(seq *kvcache.Sequence, prompt []int) int {
	n := commonPrefix(seq.Tokens(), prompt[:len(prompt)-1])
	seq.Rewind(n, prompt[n])
	return n
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Done reports whether the generation has ended.
func (d *Decoder) Done() bool { return d.done }

// Prefilling reports whether prompt tokens remain to be forwarded.
func (d *Decoder) Prefilling() bool { return d.next < 0 && !d.done }

// Result is the generation so far (final after Finish).
func (d *Decoder) Result() *Result { return &d.res }

// Seq is the sequence the decoder fills.
func (d *Decoder) Seq() *kvcache.Sequence { return d.seq }

var errDone = errors.New("generate: the generation has ended")

// Next returns the rows this sequence forwards next: the next prompt chunk
// while prefilling, else the sampled token, followed (when alone says the
// sequence is forwarded by itself, the decoder speculates, its gate lets
// it draft and the draft could be used) by the MTP layer's draft of the
// token after it, which Next computes. The request must go through one
// forward and its output to Consume before Next is called again.
func (d *Decoder) Next(ctx context.Context, alone bool) (model.Request, error) {
	switch {
	case d.done:
		return model.Request{}, errDone
	case d.inflight > 0:
		return model.Request{}, errors.New("generate: the previous request was not consumed")
	case d.next < 0:
		if err := d.Restore(ctx); err != nil {
			return model.Request{}, err
		}
		from := d.prefilled
		n := min(d.p.PrefillChunk, len(d.prompt)-from)
		d.inflight = n
		req := model.Request{Seq: d.seq, Tokens: d.prompt[from : from+n]}
		if d.p.OnPrefill != nil {
			req.OnLayer = func(done, layers int) { d.progress(from + n*done/layers) }
		}
		return req, nil
	}
	d.pos = d.seq.Len()
	d.draft = -1
	tokens := d.row[:1]
	tokens[0] = d.next
	mode := d.stepMode(alone)
	if mode == draftgate.Draft {
		if err := d.catchUp(ctx); err != nil {
			return model.Request{}, fmt.Errorf("generate: MTP layer: %w", err)
		}
	}
	d.drafting.begin(alone && d.mtp != nil, mode)
	switch {
	case mode == draftgate.Draft:
		draft, err := d.draftNext(ctx)
		if err != nil {
			return model.Request{}, fmt.Errorf("generate: MTP draft: %w", err)
		}
		d.draft = draft
		tokens = append(tokens, draft)
	case d.mtp != nil && d.mtp.n >= MaxPendingMTP-1 && d.drafting.keepMTP():
		// Not drafting now (batched, or re-checking plain steps) while
		// drafting is the choice: absorb before the queue overflows, so
		// that the MTP layer keeps its context. While plain steps are the
		// choice the queue overflows instead and the MTP layer starts
		// over: a decode that does not draft reads none of its experts.
		if _, err := d.absorbPending(ctx); err != nil {
			return model.Request{}, fmt.Errorf("generate: MTP layer: %w", err)
		}
	}
	d.inflight = len(tokens)
	return model.Request{Seq: d.seq, Tokens: tokens, AllLogits: true}, nil
}

// stepMode is how the next decode step runs: drafting when the sequence
// is forwarded alone, speculates, has a hidden state for the MTP layer,
// its gate drafts and the draft could be used.
func (d *Decoder) stepMode(alone bool) draftgate.Mode {
	if d.mtp == nil || d.mtp.n == 0 || !alone || d.drafting.mode() != draftgate.Draft || !d.roomToDraft() {
		return draftgate.Plain
	}
	return draftgate.Draft
}

// roomToDraft reports whether a draft's token could be emitted: the limit
// on tokens and the context leave room for two more.
func (d *Decoder) roomToDraft() bool {
	return d.pos+2 <= d.seq.Limit() && len(d.res.Tokens)+1 < d.p.MaxTokens
}

// Consume takes the output of the forward of Next's request and what that
// forward cost: it samples and emits the next token(s), keeps or rolls back
// a draft, and feeds the MTP layer. It returns the error of onToken or of
// the constraint, or of the MTP layer's forward.
func (d *Decoder) Consume(ctx context.Context, out model.Output, cost Cost) error {
	n := d.inflight
	if n == 0 {
		return errors.New("generate: no request in flight")
	}
	d.inflight = 0
	if d.next < 0 {
		return d.consumePrefill(ctx, out, cost, n)
	}
	d.res.DecodeTokens += n
	d.res.DecodeExpertBytes += cost.ExpertBytes
	d.res.DecodeExpertsRead += cost.ExpertsRead
	emitted := len(d.res.Tokens)
	accepted, err := d.consumeDecode(out)
	d.drafting.end(len(d.res.Tokens)-emitted, accepted, cost.ExpertBytes)
	return err
}

// consumeDecode samples the token after the forwarded one and, when the
// draft was that token, the one after the draft; it reports whether the
// draft was accepted.
func (d *Decoder) consumeDecode(out model.Output) (accepted bool, err error) {
	if d.mtp != nil {
		d.pushMTP(d.pos, out.Hidden[0])
		d.mtp.last = 1
	}
	if ended, err := d.take(out.Logits[0]); ended || err != nil {
		return false, err
	}
	if d.draft < 0 {
		return false, nil
	}
	if d.next != d.draft {
		d.seq.Trim(d.pos + 1)
		return false, nil
	}
	d.res.DraftsAccepted++
	d.pushMTP(d.pos+1, out.Hidden[1])
	d.mtp.last = 2
	_, err = d.take(out.Logits[1])
	return true, err
}

// consumePrefill takes a prompt chunk's output: the MTP layer absorbs the
// chunk's rows whose next token is known, the chunk's blocks join the
// prompt cache, and after the last chunk the first token is sampled
// (before the MTP layer's forward reuses the buffers the logits live in)
// and emitted once the MTP layer has absorbed the prompt.
func (d *Decoder) consumePrefill(ctx context.Context, out model.Output, cost Cost, n int) error {
	from := d.prefilled
	d.prefilled += n
	d.res.PrefillChunks++
	d.res.PrefillExpertBytes += cost.ExpertBytes
	d.res.PrefillExpertsRead += cost.ExpertsRead
	d.touched.Union(cost.Experts)
	last := d.prefilled == len(d.prompt)
	if d.pool != nil {
		d.poolRows(out.Hidden[:n], last)
		return nil
	}
	var tok int
	var tl *Token
	stop := false
	if last {
		tok, tl, stop = d.logits.pick(d.sampler, out.Logits[len(out.Logits)-1])
	}
	// After the last chunk the MTP layer only matters when decoding goes on.
	if d.mtp != nil && (!last || (!stop && !slices.Contains(d.p.StopTokens, tok) && len(d.res.Tokens)+1 < d.p.MaxTokens)) {
		if err := d.absorbPrompt(ctx, from, out.Hidden, last); err != nil {
			return fmt.Errorf("generate: MTP prompt pass: %w", err)
		}
	}
	d.storePrompt(ctx, from, out.Hidden)
	if !last {
		return nil
	}
	d.res.PrefillExpertsTouched = d.touched.Len()
	d.res.PrefillExpertsByLayer = d.touched.PerLayer(d.m.Config().NumRoutedExperts)
	d.first = time.Now()
	d.res.PrefillTime = d.first.Sub(d.started)
	if stop {
		d.res.FinishReason = FinishStop
		d.done = true
		return nil
	}
	_, err := d.emit(tok, tl)
	return err
}

// take samples the next token from logits and records it; it reports
// whether generation has ended.
func (d *Decoder) take(logits []float32) (bool, error) {
	tok, tl, stop := d.logits.pick(d.sampler, logits)
	if stop {
		d.res.FinishReason = FinishStop
		d.done = true
		return true, nil
	}
	return d.emit(tok, tl)
}

// emit records a sampled token: a stop token ends generation, others go
// to the constraint and onToken; MaxTokens and the context limit end it
// too.
func (d *Decoder) emit(tok int, tl *Token) (bool, error) {
	if slices.Contains(d.p.StopTokens, tok) {
		d.res.FinishReason, d.res.StopToken = FinishStop, tok
		d.done = true
		return true, nil
	}
	if c := d.p.Constraint; c != nil {
		if err := c.Accept(tok); err != nil {
			d.done = true
			return true, fmt.Errorf("generate: the constraint refused token %d: %w", tok, err)
		}
	}
	d.res.Tokens = append(d.res.Tokens, tok)
	d.logits.generated(tok)
	d.next = tok
	if d.onToken != nil {
		t := Token{ID: tok}
		if tl != nil {
			t = *tl
		}
		if err := d.onToken(t); err != nil {
			d.done = true
			return true, err
		}
	}
	// The context is full when every emitted token but the newest is
	// cached and the cache is at its limit.
	if len(d.res.Tokens) >= d.p.MaxTokens || len(d.prompt)+len(d.res.Tokens)-1 >= d.seq.Limit() {
		d.res.FinishReason = FinishLength
		d.done = true
		return true, nil
	}
	return false, nil
}

// Finish ends the generation (if it has not ended) and leaves the cache
// as the plain path does whatever happened: the prompt and every emitted
// token but the last (the last too when a stop ended generation, since it
// was forwarded to sample the stop). The MTP layer then absorbs the hidden
// states still pending (so that a next turn on the sequence continues it)
// and the sequence's blocks join the prompt cache; ctx bounds that work
// (an ended ctx skips the MTP layer's forward and any wait for the cache).
// It runs forwards in the decoder's runner: call it when no other
// output of that runner is still to be consumed. It is safe to call more
// than once.
func (d *Decoder) Finish(ctx context.Context) {
	if d.finished {
		return
	}
	d.finished, d.done = true, true
	keep := len(d.prompt)
	if n := len(d.res.Tokens); n > 0 {
		keep += n - 1
		if d.res.FinishReason == FinishStop {
			keep++
		}
	}
	d.seq.Trim(keep)
	if d.first.IsZero() {
		d.res.PrefillTime = time.Since(d.started)
	} else {
		d.res.DecodeTime = time.Since(d.first)
	}
	d.res.CacheCreationTokens = min(d.res.CacheCreationTokens, max(len(d.prompt)-d.res.CachedTokens, 0))
	d.keepState(ctx)
	if d.mtp != nil {
		d.res.Drafting = d.drafting.report()
	}
}

// progress reports done of the prompt's tokens cached.
func (d *Decoder) progress(done int) {
	if d.p.OnPrefill != nil {
		d.p.OnPrefill(done, len(d.prompt))
	}
}
