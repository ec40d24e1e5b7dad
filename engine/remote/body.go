package remote

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// A non-streamed answer is read whole, so what a hostile or broken remote
// sends costs memory before it can be refused. Two bounds hold it:
//
//   - one answer is at most MaxBody bytes: an answer that declares more
//     (Content-Length) is refused before a byte is read, and one without
//     a length is refused once it passes MaxBody, its buffer never larger
//     than MaxBody+1 (no append doubling past it);
//   - the answers a client holds at once are at most DefaultBodyBudget
//     bytes together: each answer's buffer counts from its first byte
//     until the request that read it ends (its context), so many answers
//     at once, oversized or not, cannot add up past it. One that finds
//     the budget spent is refused with a 503 and Retry-After.
//
// Eight concurrent oversized answers reached 1.1 GB (64 would have
// reached about 8 GB); now they hold at most the budget.

const (
	// MaxBody bounds a non-streamed answer read whole.
	MaxBody = 64 << 20
	// DefaultBodyBudget bounds the non-streamed answers one client holds
	// at once (four of MaxBody); it is part of the runtime reserve of the
	// memory plan (plan.DefaultRuntimeReserve, 1 GiB), as the remote
	// engine loads no model.
	DefaultBodyBudget = 256 << 20
	// firstBodyChunk is the buffer an answer of unknown length starts with.
	firstBodyChunk = 64 << 10
)

// bodyBudget is the bytes of answers a client may hold at once.
type bodyBudget struct {
	total int64
	mu    sync.Mutex
	left  int64
}

func newBodyBudget(n int64) *bodyBudget { return &bodyBudget{total: n, left: n} }

// take reserves n bytes, or reports false when fewer are left.
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// available is the bytes left (tests).
func (b *bodyBudget) available() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

// ReadBody reads a non-streamed answer whole (at most MaxBody bytes) and
// closes it. The bytes count against the client's budget until the
// context of the request that asked for the answer ends. An answer of a
// Client's Do comes with the remote key cleaned out.
func ReadBody(resp *http.Response) ([]byte, error) {
	return readBody(resp, true)
}

// readBody is ReadBody; with hold false the budget is given back when it
// returns (the caller drops the bytes before it returns).
func readBody(resp *http.Response, hold bool) ([]byte, error) {
	defer resp.Body.Close()
	limit, budget, ctx := int64(MaxBody), (*bodyBudget)(nil), context.Context(nil)
	wb, watched := resp.Body.(*watchedBody)
	if watched {
		limit, budget, ctx = wb.c.maxBody, wb.c.bodies, wb.parent
	}
	if resp.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	held := int64(0)
	grow := func(n int64) error {
		if budget != nil && !budget.take(n) {
			return &Error{Kind: KindStatus, Status: http.StatusServiceUnavailable, Type: "server_error", Code: "remote_answers_over_budget",
				Message: fmt.Sprintf("Spool already holds %d MiB of non-streamed remote answers; retry shortly, or stream", budget.total>>20), RetryAfter: "1"}
		}
		held += n
		return nil
	}
	release := func() {
		if budget != nil && held > 0 {
			budget.give(held)
		}
	}
	data, err := readBounded(resp.Body, resp.ContentLength, limit, grow)
	if err != nil {
		release()
		return nil, err
	}
	if watched {
		data = wb.c.scrubBytes(data)
	}
	if !hold || ctx == nil || ctx.Done() == nil {
		release()
	} else {
		context.AfterFunc(ctx, release)
	}
	return data, nil
}

// readBounded reads r whole into a buffer that never exceeds limit+1
// bytes, calling grow for every byte of buffer before it is allocated.
// size is the declared length (-1: unknown).
func readBounded(r io.Reader, size, limit int64, grow func(int64) error) ([]byte, error) {
	first := min(int64(firstBodyChunk), limit+1)
	if size >= 0 {
		// The declared length, plus one byte to see a longer answer.
		first = size + 1
	}
	if err := grow(first); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, first)
	for {
		if len(buf) == cap(buf) {
			next := min(2*int64(cap(buf)), limit+1)
			if next <= int64(cap(buf)) {
				return nil, tooLarge(limit)
			}
			if err := grow(next); err != nil {
				return nil, err
			}
			// The old buffer stays counted: it is garbage, not yet free.
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge(limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func tooLarge(limit int64) *Error {
	return &Error{Kind: KindProtocol, Message: fmt.Sprintf("the remote engine's answer is larger than %d bytes", limit)}
}
