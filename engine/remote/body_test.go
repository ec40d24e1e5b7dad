package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingBody is an endless (or n-byte) answer that counts what is read.
type countingBody struct {
	n, read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	left := b.n.Load() - b.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), left)
	for i := range p[:k] {
		p[i] = 'x'
	}
	b.read.Add(k)
	return int(k), nil
}

func (b *countingBody) Close() error { return nil }

// answering is a transport whose every answer is a 200 of n bytes, with a
// Content-Length when declared.
type answering struct {
	n        int64
	declared bool
	bodies   []*countingBody
}

func (a *answering) RoundTrip(req *http.Request) (*http.Response, error) {
	b := &countingBody{}
	b.n.Store(a.n)
	a.bodies = append(a.bodies, b)
	cl := int64(-1)
	if a.declared {
		cl = a.n
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: cl, Body: b, Request: req}, nil
}

func bodyClient(t *testing.T, tr http.RoundTripper, maxBody, budget int64) *Client {
	t.Helper()
	c, err := New(Config{URL: "http://upstream.test", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	c.maxBody, c.bodies = maxBody, newBodyBudget(budget)
	return c
}

func readAnswer(t *testing.T, c *Client, ctx context.Context) ([]byte, error) {
	t.Helper()
	resp, err := c.Do(ctx, http.MethodPost, "/v1/chat/completions", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	return ReadBody(resp)
}

// An answer that declares more than the limit is refused before a byte of
// it is read or a buffer allocated for it.
func TestOversizedDeclaredAnswerIsRefusedUnread(t *testing.T) {
	tr := &answering{n: 512 << 20, declared: true}
	c := bodyClient(t, tr, 4<<10, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAnswer(t, c, context.Background())
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than 4096 bytes") {
		t.Fatalf("a 512 MiB answer with a 4 KiB limit: %v", err)
	}
	if n := tr.bodies[0].read.Load(); n != 0 {
		t.Errorf("read %d bytes of an answer refused by its length", n)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", grew)
	}
	if c.bodies.available() != 1<<20 {
		t.Errorf("the budget was not given back: %d left", c.bodies.available())
	}
}

// An answer without a length is refused once it passes the limit: no more
// than limit+1 bytes are read, into a buffer no larger.
func TestOversizedChunkedAnswerIsRefusedAtTheLimit(t *testing.T) {
	tr := &answering{n: 512 << 20}
	const limit = 200 << 10
	c := bodyClient(t, tr, limit, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAnswer(t, c, context.Background())
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a 512 MiB answer with a 200 KiB limit: %v", err)
	}
	if n := tr.bodies[0].read.Load(); n > limit+1 {
		t.Errorf("read %d bytes, want at most %d", n, limit+1)
	}
	// Buffers of 64, 128 and 200 KiB (+1), and the client's bookkeeping.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 3*limit {
		t.Errorf("refusing it allocated %d bytes, want under %d", grew, 3*limit)
	}
	// An answer within the limit is read whole.
	tr.n = 100 << 10
	if data, err := readAnswer(t, c, context.Background()); err != nil || len(data) != 100<<10 {
		t.Fatalf("a 100 KiB answer: %d bytes, %v", len(data), err)
	}
}

// The answers held at once stay within the budget: an answer counts until
// its request ends; one that finds the budget spent gets a 503 with
// Retry-After; the budget comes back when the requests end.
func TestAnswersHeldAtOnceStayWithinTheBudget(t *testing.T) {
	tr := &answering{n: 3 << 10, declared: true}
	c := bodyClient(t, tr, 4<<10, 8<<10)
	ctx1, end1 := context.WithCancel(context.Background())
	ctx2, end2 := context.WithCancel(context.Background())
	defer end2()
	for _, ctx := range []context.Context{ctx1, ctx2} {
		if data, err := readAnswer(t, c, ctx); err != nil || len(data) != 3<<10 {
			t.Fatalf("an answer within the budget: %d %v", len(data), err)
		}
	}
	_, err := readAnswer(t, c, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.RetryAfter == "" {
		t.Fatalf("a third answer past the budget: %#v", err)
	}
	end1()
	for i := 0; c.bodies.available() < (8<<10)-(3<<10+1); i++ {
		if i > 10000 {
			t.Fatalf("the ended request's answer was not given back: %d left", c.bodies.available())
		}
		time.Sleep(time.Millisecond)
	}
	if data, err := readAnswer(t, c, context.Background()); err != nil || !bytes.Equal(data, bytes.Repeat([]byte("x"), 3<<10)) {
		t.Fatalf("after a request ended: %d %v", len(data), err)
	}
}
