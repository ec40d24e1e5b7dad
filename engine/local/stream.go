package local

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/glm"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/engine/turn"
)

// Stream is a turn running on the local engine (a turn.Stream): it reads
// the scheduler's tokens, detokenizes them, matches the stop strings,
// reads the GLM dialect out of the text (reasoning, tool calls, whose ids
// it mints) and gives pieces, with an Idle piece every keep-alive interval
// nothing comes.
type Stream struct {
	e      *Engine
	ctx    context.Context // the turn's
	p      *prepared
	st     *scheduler.Stream
	dec    *tokenizer.StreamDecoder
	stops  *stopMatcher
	parser *glm.Parser

	completion int // tokens generated
	calls      int // tool calls made
	stopString string
	// last is the last piece, waiting behind the output it follows; err
	// the error that ends the turn after the output before it.
	last   *turn.Piece
	err    error
	closed bool
	// stopped is the error Stop ended the turn with.
	stopped atomic.Pointer[error]
}

func (e *Engine) start(ctx context.Context, p *prepared) (*Stream, error) {
	st, err := e.submit(ctx, p.id, p.sreq)
	if err != nil {
		return nil, err
	}
	s := &Stream{e: e, ctx: ctx, p: p, st: st, dec: e.tok.NewStreamDecoder(true),
		stops: &stopMatcher{stops: p.stops}, parser: glm.NewParser(p.parse)}
	// A continued reply: the decoder and the dialect's parser read the
	// reply so far, so that what follows is read in its place (inside a
	// think block or a call); its pieces were given before.
	for _, id := range p.cont {
		s.parser.Add(s.dec.Add(id), glm.More)
	}
	return s, nil
}

// ID is the turn's id.
func (s *Stream) ID() string { return s.p.id }

// Model is the served model's id.
func (s *Stream) Model() string { return s.e.cfg.ModelID }

// PromptTokens is the prompt's length.
func (s *Stream) PromptTokens() int { return len(s.p.prompt) }

// Prompt is the prompt's token ids.
func (s *Stream) Prompt() []int { return s.p.prompt }

// Next returns the turn's next piece (turn.Stream).
func (s *Stream) Next(ctx context.Context) (turn.Piece, error) {
	for {
		switch {
		case s.last != nil:
			p := *s.last
			s.last, s.err = nil, turn.ErrEnded
			return p, nil
		case s.err != nil:
			return turn.Piece{}, s.err
		}
		wait, cancel := context.WithTimeout(ctx, s.e.cfg.KeepAlive)
		toks, res, err := s.st.Next(wait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return turn.Piece{}, context.Cause(ctx)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return turn.Piece{Idle: true}, nil
			}
			return turn.Piece{}, s.fail(nil, err)
		}
		p, err := s.read(toks, res)
		if err != nil {
			return turn.Piece{}, err
		}
		if empty(p) {
			continue // nothing yet, or the end alone
		}
		return p, nil
	}
}

// empty reports a piece of no output and no tokens.
func empty(p turn.Piece) bool {
	return p.Reasoning == "" && p.Text == "" && len(p.Calls) == 0 && len(p.Tokens) == 0
}

// read turns one batch of tokens (and the result, when the turn ended)
// into a piece; the end goes into s.last or s.err.
func (s *Stream) read(toks []scheduler.Token, res *scheduler.Result) (turn.Piece, error) {
	var text string
	var used []scheduler.Token
	for _, tk := range toks {
		s.completion++
		used = append(used, tk)
		emit, hit := s.stops.write(s.dec.Add(tk.ID))
		text += emit
		if hit != "" {
			s.stopString = hit
			break
		}
	}
	s.e.observe.Tokens(s.p.id, len(used))
	end := glm.More
	switch {
	case s.stopString != "":
		// A stop string ends the reply: the rest is not wanted.
		s.st.Cancel()
		res = drain(s.ctx, s.st)
		end = glm.Stop
	case res != nil:
		text += s.stops.end(s.dec.Flush())
		end = glm.Stop
		if res.FinishReason == scheduler.FinishLength {
			end = glm.Cut
		}
	}
	p, err := s.piece(text, used, end)
	if err != nil {
		return turn.Piece{}, s.fail(nil, err)
	}
	if end != glm.More {
		s.finish(res)
	}
	return p, nil
}

// piece reads text (and the tokens that made it) into a piece.
func (s *Stream) piece(text string, toks []scheduler.Token, end glm.End) (turn.Piece, error) {
	out := s.parser.Add(text, end)
	p := turn.Piece{Reasoning: out.Reasoning, Text: out.Text, Tokens: s.tokens(toks)}
	for _, c := range out.Calls {
		id, err := glm.NewCallID(rand.Reader)
		if err != nil {
			return turn.Piece{}, err
		}
		p.Calls = append(p.Calls, turn.Call{Index: s.calls, ID: id, Name: c.Name, Arguments: c.Arguments})
		s.calls++
	}
	if p.Reasoning != "" || p.Text != "" {
		s.e.observe.Output(s.p.id, p.Reasoning, p.Text)
	}
	return p, nil
}

// tokens are the turn's view of the scheduler's tokens: their ids, and
// their text and log-probabilities when the turn asked for logprobs.
func (s *Stream) tokens(toks []scheduler.Token) []turn.Token {
	if len(toks) == 0 {
		return nil
	}
	out := make([]turn.Token, len(toks))
	for i, tk := range toks {
		out[i] = turn.Token{ID: tk.ID}
		if !s.p.sreq.Logprobs {
			continue
		}
		out[i].Text, out[i].Logprob = s.text(tk.ID), tk.Logprob
		out[i].Top = make([]turn.Token, len(tk.Top))
		for j, alt := range tk.Top {
			out[i].Top[j] = turn.Token{ID: alt.ID, Text: s.text(alt.ID), Logprob: alt.Logprob}
		}
	}
	return out
}

func (s *Stream) text(id int) string {
	b, _ := s.e.tok.TokenBytes(id)
	return string(b)
}

// finish records how the turn ended: its last piece, or its error.
func (s *Stream) finish(res *scheduler.Result) {
	end := &turn.End{Model: s.e.cfg.ModelID, Finish: turn.FinishStop, StopSequence: s.stopString}
	var err error
	switch {
	case res == nil:
		err = context.Cause(s.ctx)
		if err == nil {
			err = context.Canceled
		}
	case s.stopString != "":
	case res.FinishReason == scheduler.FinishError:
		err = engineError(res.Err)
	case res.FinishReason == scheduler.FinishCancelled:
		// Cancelled, not by its client: Stop's error, or the engine's
		// own stop.
		if err = context.Cause(s.ctx); err == nil {
			err = apiwire.ShuttingDown()
			if cause := s.stopped.Load(); cause != nil {
				err = *cause
			}
		}
	case res.FinishReason == scheduler.FinishLength:
		end.Finish = turn.FinishLength
	}
	if err != nil {
		s.fail(res, err)
		return
	}
	if s.calls > 0 && end.Finish == turn.FinishStop {
		end.Finish = turn.FinishToolCalls
	}
	end.Usage = turn.Usage{PromptTokens: len(s.p.prompt), CompletionTokens: s.completion, CachedTokens: res.CachedTokens,
		CacheCreationTokens: res.CacheCreationTokens, Engine: engineUsage(res)}
	s.last = &turn.Piece{End: end}
	s.e.observe.End(s.p.id, res, end.Finish)
}

// fail ends the turn with err (the observer hears res, when there is one)
// and returns err.
func (s *Stream) fail(res *scheduler.Result, err error) error {
	if s.err == nil {
		s.err = err
		s.st.Cancel()
		finish := scheduler.FinishError
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			finish = scheduler.FinishCancelled
		}
		s.e.observe.End(s.p.id, res, finish)
	}
	return err
}

// Queued reports whether the turn still waits for the scheduler (its
// prefill has not begun). Safe to call from any goroutine.
func (s *Stream) Queued() bool {
	select {
	case <-s.st.Admitted():
		return false
	default:
		return true
	}
}

// Stop ends a running turn with err, which the reader's Next returns
// after the output before it (a server that stops ends its turns with
// apiwire.ShuttingDown). Safe to call from any goroutine, while another
// reads the stream.
func (s *Stream) Stop(err error) {
	s.stopped.CompareAndSwap(nil, &err)
	s.st.Cancel()
}

// Close ends the turn, cancelling it if it still runs.
func (s *Stream) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.st.Cancel()
	if s.err == nil && s.last == nil {
		s.err = turn.ErrEnded
		s.e.observe.End(s.p.id, nil, scheduler.FinishCancelled)
	}
}

// engineUsage is the turn's engine report from the scheduler's result.
func engineUsage(r *scheduler.Result) *turn.EngineUsage {
	if r == nil {
		return &turn.EngineUsage{}
	}
	return &turn.EngineUsage{
		Lane: r.Lane, PeakBatch: r.PeakBatch,
		QueueMS: turn.MS(r.QueueWait), PrefillMS: turn.MS(r.PrefillTime), DecodeMS: turn.MS(r.DecodeTime),
		DraftsProposed: r.DraftsProposed, DraftsAccepted: r.DraftsAccepted,
		Prefill: r.PrefillTime, Decode: r.DecodeTime,
	}
}

// drain waits for a cancelled stream's result.
func drain(ctx context.Context, st *scheduler.Stream) *scheduler.Result {
	for {
		_, res, err := st.Next(ctx)
		if err != nil || res != nil {
			return res
		}
	}
}
