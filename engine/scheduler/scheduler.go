package scheduler

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/promptcache"
)

// Defaults of Config.
const (
	// DefaultMaxBatch is the requests generating at once.
	DefaultMaxBatch = 8
	// DefaultMaxQueue is the requests waiting for a sequence.
	DefaultMaxQueue = 16
)

// Config bounds the scheduler. Zero fields take the defaults.
type Config struct {
	// MaxBatch is the number of requests generating at once, each with
	// its own sequence (default DefaultMaxBatch).
	MaxBatch int
	// MaxQueue is the number of requests waiting for a sequence; Submit
	// refuses more with ErrQueueFull (default DefaultMaxQueue).
	MaxQueue int
	// ContextLength is each sequence's token limit (default and maximum:
	// the model's max_position_embeddings).
	ContextLength int
	// IdleSequences is how many finished sequences are kept so that a
	// later prompt sharing their prefix (the next turn of a chat) skips
	// its prefill (default 2; negative keeps none).
	IdleSequences int
	// PrefillChunk bounds the prompt tokens one forward takes (default
	// generate.DefaultPrefillChunk); the memory plan sizes it.
	PrefillChunk int
	// PromptCache, when set, is the prompt cache every request restores
	// its prompt's cached prefix from and stores its blocks into (see
	// generate.Params.PromptCache); the caller closes it after Run.
	PromptCache *promptcache.Cache
	// Drafting configures the gate each sequence gets, which decides which
	// of a lone speculative request's decode steps draft (see
	// engine/draftgate); what it measured carries over the turns of a
	// conversation that reuses the sequence. The zero value gives the
	// defaults; Drafting.Always drafts in every lone step.
	Drafting draftgate.Config
}

func (c Config) withDefaults(m *model.Model) Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if maxCtx := m.Config().MaxPositionEmbeddings; c.ContextLength <= 0 || c.ContextLength > maxCtx {
		c.ContextLength = maxCtx
	}
	switch {
	case c.IdleSequences == 0:
		c.IdleSequences = 2
	case c.IdleSequences < 0:
		c.IdleSequences = 0
	}
	if c.PrefillChunk <= 0 {
		c.PrefillChunk = generate.DefaultPrefillChunk
	}
	return c
}

// Scheduler runs the requests of one model. Submit, Stats and Config are
// safe for concurrent use; Run drives everything else on its own goroutine.
type Scheduler struct {
	m   *model.Model
	r   *model.Runner // every forward runs in its buffers
	cfg Config

	wake chan struct{} // capacity 1: the queue changed

	mu      sync.Mutex
	queue   []*entry
	closed  bool
	running bool
	stats   Stats

	// Owned by Run.
	active    []*active
	idle      []*kvcache.Sequence
	sequences int // sequences alive: active and idle, at most MaxBatch
	// gates holds each sequence's drafting gate, made for it when a
	// speculative request first needs one.
	gates map[*kvcache.Sequence]*draftgate.Gate
	reqs  []model.Request
	// embedAlone: the last step on an accelerated model forwarded an
	// embedding's chunk alone (the next gives the decoders theirs).
	embedAlone bool
}

// entry is a submitted request.
type entry struct {
	req       Request
	stream    *Stream
	submitted time.Time
}

// New returns a scheduler for m; call Run to start it.
func New(m *model.Model, cfg Config) *Scheduler {
	cfg = cfg.withDefaults(m)
	return &Scheduler{m: m, r: m.NewRunner(), cfg: cfg, wake: make(chan struct{}, 1), gates: map[*kvcache.Sequence]*draftgate.Gate{}}
}

// Config returns the effective configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// Model returns the model the scheduler drives.
func (s *Scheduler) Model() *model.Model { return s.m }

// Submit queues a request. ctx bounds the request: when it ends, the
// request is cancelled. It fails with ErrQueueFull when the queue is at its
// bound, with a *kvcache.ContextError when the prompt does not fit the
// context, and with ErrClosed after Run has returned.
func (s *Scheduler) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := req.validate(s.m.Config().VocabSize); err != nil {
		return nil, err
	}
	if len(req.Prompt) > s.cfg.ContextLength {
		return nil, &kvcache.ContextError{Have: 0, Add: len(req.Prompt), Limit: s.cfg.ContextLength}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if len(s.queue) >= s.cfg.MaxQueue {
		return nil, ErrQueueFull
	}
	st := newStream(ctx)
	e := &entry{req: req, stream: st, submitted: time.Now()}
	s.queue = append(s.queue, e)
	s.stats.Queued = len(s.queue)
	// A request whose client gives up while it waits leaves the queue
	// at once, not when a sequence frees: its slot goes to the next.
	context.AfterFunc(st.ctx, func() { s.dequeue(e) })
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return st, nil
}

// dequeue takes a cancelled request out of the queue and finishes it; a
// request already admitted (or finished) is not there, and is left alone.
func (s *Scheduler) dequeue(e *entry) {
	s.mu.Lock()
	i := slices.Index(s.queue, e)
	if i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.stats.Queued = len(s.queue)
	}
	s.mu.Unlock()
	if i < 0 {
		return
	}
	r := &Result{Err: e.stream.ctx.Err(), Lane: LaneSingle, QueueWait: time.Since(e.submitted)}
	r.FinishReason, r.StopToken, r.PromptTokens = FinishCancelled, -1, len(e.req.Prompt)
	e.stream.finish(r)
}

// Run serves requests until ctx ends, then finishes every pending request
// with FinishCancelled and returns ctx's error.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.running = true
	s.mu.Unlock()
	defer s.shutdown()
	for {
		s.admit()
		s.reap()
		if len(s.active) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.wake:
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.step(ctx)
	}
}

// shutdown refuses new requests and finishes the pending ones.
func (s *Scheduler) shutdown() {
	s.mu.Lock()
	s.closed = true
	queued := s.queue
	s.queue = nil
	s.stats.Queued, s.stats.Active = 0, 0
	s.mu.Unlock()
	for _, e := range queued {
		r := &Result{Err: ErrClosed, Lane: LaneSingle}
		r.FinishReason, r.StopToken, r.PromptTokens = FinishCancelled, -1, len(e.req.Prompt)
		e.stream.finish(r)
	}
	for _, a := range s.active {
		s.end(a, FinishCancelled, ErrClosed)
	}
	s.active = nil
	s.idle = nil
	s.sequences = 0
	clear(s.gates)
}

// admit moves queued requests into free sequences, in order.
func (s *Scheduler) admit() {
	for len(s.active) < s.cfg.MaxBatch {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		e := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.stats.Queued = len(s.queue)
		s.mu.Unlock()
		a := s.start(e)
		if a.done {
			continue // refused or failed; start finished it
		}
		if err := e.stream.ctx.Err(); err != nil {
			s.end(a, FinishCancelled, err)
			continue
		}
		s.active = append(s.active, a)
		e.stream.markAdmitted()
	}
	s.mu.Lock()
	s.stats.Active, s.stats.Sequences = len(s.active), s.sequences
	s.mu.Unlock()
}

// reap finishes cancelled requests.
func (s *Scheduler) reap() {
	for _, a := range s.active {
		if err := a.stream.ctx.Err(); err != nil && !a.done {
			s.end(a, FinishCancelled, err)
		}
	}
	s.compact()
}

// compact drops finished requests from the active list.
func (s *Scheduler) compact() {
	live := s.active[:0]
	for _, a := range s.active {
		if !a.done {
			live = append(live, a)
		}
	}
	clear(s.active[len(live):])
	s.active = live
	s.mu.Lock()
	s.stats.Active, s.stats.Sequences = len(s.active), s.sequences
	s.mu.Unlock()
}

// sequenceFor takes the idle sequence sharing the longest prefix with
// prompt (keeping at least one prompt token to forward), else a new one
// while fewer than MaxBatch sequences exist, else the oldest idle one: at
// most MaxBatch sequences (the memory plan's KV cache line) ever hold
// state. The decoder trims it to the common prefix. An embedding reuses
// nothing, so it takes a new sequence while one may be made and leaves the
// idle ones with the most recent prefixes to chats.
func (s *Scheduler) sequenceFor(prompt []int, embed bool) *kvcache.Sequence {
	best, bestLen := -1, 0
	for i, seq := range s.idle {
		if embed {
			break
		}
		n := commonPrefix(seq.Tokens(), prompt[:len(prompt)-1])
		if n > bestLen {
			best, bestLen = i, n
		}
	}
	if best < 0 && (s.sequences < s.cfg.MaxBatch || len(s.idle) == 0) {
		s.sequences++
		return s.m.NewSequence(s.cfg.ContextLength)
	}
	if best < 0 {
		// Another conversation's sequence: its gate measured that one.
		best = 0
		delete(s.gates, s.idle[0])
	}
	seq := s.idle[best]
	s.idle = append(s.idle[:best], s.idle[best+1:]...)
	return seq
}

// gateFor is seq's drafting gate.
func (s *Scheduler) gateFor(seq *kvcache.Sequence) *draftgate.Gate {
	g := s.gates[seq]
	if g == nil {
		g = draftgate.New(s.cfg.Drafting)
		s.gates[seq] = g
	}
	return g
}

// release keeps a finished sequence for prefix reuse, or drops it (an
// embedding's: a later request never continues plain text pooled for a
// vector, and keeping it would evict a chat's).
func (s *Scheduler) release(seq *kvcache.Sequence, embed bool) {
	if s.cfg.IdleSequences == 0 || seq.Len() == 0 || embed {
		delete(s.gates, seq)
		s.sequences--
		return
	}
	if len(s.idle) >= s.cfg.IdleSequences {
		delete(s.gates, s.idle[0])
		s.idle = append(s.idle[:0], s.idle[1:]...)
		s.sequences--
	}
	s.idle = append(s.idle, seq)
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
