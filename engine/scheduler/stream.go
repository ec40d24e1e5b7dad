package scheduler

import (
	"context"
	"sync"
)

// Stream delivers one request's tokens. The scheduler never blocks on a
// slow reader: tokens accumulate until Next takes them.
type Stream struct {
	ctx    context.Context // ends when the request is cancelled
	cancel context.CancelFunc

	mu       sync.Mutex
	tokens   []Token
	result   *Result
	notify   chan struct{} // capacity 1: something new to read
	admitted chan struct{} // closed when a sequence is assigned
	admitOne sync.Once
}

func newStream(ctx context.Context) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{ctx: ctx, cancel: cancel, notify: make(chan struct{}, 1), admitted: make(chan struct{})}
}

// Next blocks until tokens or the result are available and returns the
// tokens generated since the last call. res is non-nil once the request
// has finished and every token has been returned. err is ctx's error when
// ctx ends first (the request keeps running; call Cancel to stop it).
func (s *Stream) Next(ctx context.Context) (toks []Token, res *Result, err error) {
	for {
		s.mu.Lock()
		toks, s.tokens = s.tokens, nil
		res = s.result
		s.mu.Unlock()
		if len(toks) > 0 || res != nil {
			return toks, res, nil
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// Admitted is closed when the request leaves the queue and its prefill
// starts.
func (s *Stream) Admitted() <-chan struct{} { return s.admitted }

// Cancel stops the request; it finishes with FinishCancelled (unless it has
// already finished) before its next token and frees its sequence.
func (s *Stream) Cancel() { s.cancel() }

func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.tokens = append(s.tokens, t)
	s.mu.Unlock()
	s.wake()
}

func (s *Stream) finish(r *Result) {
	s.mu.Lock()
	s.result = r
	s.mu.Unlock()
	s.markAdmitted()
	s.cancel() // release the context's resources
	s.wake()
}

func (s *Stream) markAdmitted() { s.admitOne.Do(func() { close(s.admitted) }) }

func (s *Stream) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}
