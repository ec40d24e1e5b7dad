package diskio

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/native/offheap"
)

// waitGoroutines waits until the number of goroutines drops to want, failing
// the test if it does not within a few seconds.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	for range 500 {
		if runtime.NumGoroutine() <= want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("goroutines: %d, want %d\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
}

func openTestFile(t *testing.T, size int) (*DirectFile, []byte) {
	t.Helper()
	path, data := writeTestFile(t, t.TempDir(), size)
	f, err := OpenDirect(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

func newSlab(t *testing.T, n int64) []byte {
	t.Helper()
	b, err := offheap.AllocAligned(int(SlabLen(n)), DirectAlign)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { offheap.Free(b) })
	return b
}

func TestReadPoolManyConcurrentRequests(t *testing.T) {
	before := runtime.NumGoroutine()
	const size = 1 << 20
	f, want := openTestFile(t, size)
	p := NewReadPool(4)
	r := rand.New(rand.NewPCG(1, 2))
	type pending struct {
		off, n int64
		ch     <-chan ReadResult
	}
	var all []pending
	var mu sync.Mutex
	var submitters sync.WaitGroup
	for g := range 4 {
		reqs := make([]ReadRequest, 50)
		for i := range reqs {
			off := r.Int64N(size)
			n := r.Int64N(size - off + 1)
			reqs[i] = ReadRequest{File: f, Off: off, Len: n, Slab: newSlab(t, n), Tag: g*100 + i}
		}
		submitters.Add(1)
		go func() {
			defer submitters.Done()
			for _, req := range reqs {
				ch, err := p.Submit(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, pending{req.Off, req.Len, ch})
				mu.Unlock()
			}
		}()
	}
	submitters.Wait()
	for _, pd := range all {
		res := <-pd.ch
		if res.Err != nil {
			t.Fatalf("read at %d length %d: %v", pd.off, pd.n, res.Err)
		}
		if !bytes.Equal(res.Data, want[pd.off:pd.off+pd.n]) {
			t.Fatalf("read at %d length %d: wrong bytes", pd.off, pd.n)
		}
		wantBytes := pd.n
		if f.Direct() && pd.n > 0 {
			_, wantBytes = AlignedSpan(pd.off, pd.n)
		}
		if res.Bytes != wantBytes || res.Service < 0 || res.Wait < 0 {
			t.Fatalf("read at %d length %d: Bytes %d (want %d), Service %v, Wait %v", pd.off, pd.n, res.Bytes, wantBytes, res.Service, res.Wait)
		}
	}
	if len(all) != 200 {
		t.Fatalf("%d results, want 200", len(all))
	}
	p.Close()
	waitGoroutines(t, before)
}

// blockedPool returns a one-worker pool whose worker is held inside the Done
// callback of a first request until release is closed.
func blockedPool(t *testing.T, f *DirectFile) (p *ReadPool, first <-chan ReadResult, release chan struct{}) {
	t.Helper()
	p = NewReadPool(1)
	started := make(chan struct{})
	release = make(chan struct{})
	first, err := p.Submit(context.Background(), ReadRequest{
		File: f, Off: 0, Len: 100, Slab: newSlab(t, 100),
		Done: func(ReadResult) {
			close(started)
			<-release
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	return p, first, release
}

func TestReadPoolCancellation(t *testing.T) {
	before := runtime.NumGoroutine()
	f, want := openTestFile(t, 64<<10)
	p, first, release := blockedPool(t, f)

	// Cancelled while queued: completes with the context's error, unread.
	ctx, cancel := context.WithCancel(context.Background())
	queued, err := p.Submit(ctx, ReadRequest{File: f, Off: 10, Len: 10, Slab: newSlab(t, 10), Tag: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	// Fill the rest of the queue, then a Submit with a cancelled context fails.
	var rest []<-chan ReadResult
	for range p.QueueDepth() - 1 {
		ch, err := p.Submit(context.Background(), ReadRequest{File: f, Off: 20, Len: 30, Slab: newSlab(t, 30)})
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, ch)
	}
	cancel()
	if _, err := p.Submit(ctx, ReadRequest{File: f, Off: 0, Len: 1, Slab: newSlab(t, 1)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with cancelled context: %v, want context.Canceled", err)
	}
	// A Submit blocked on the full queue gives up when its context ends.
	ctx2, cancel2 := context.WithCancel(context.Background())
	blocked := make(chan error)
	go func() {
		_, err := p.Submit(ctx2, ReadRequest{File: f, Off: 0, Len: 1, Slab: newSlab(t, 1)})
		blocked <- err
	}()
	cancel2()
	if err := <-blocked; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Submit after cancel: %v, want context.Canceled", err)
	}

	close(release)
	if res := <-first; res.Err != nil || !bytes.Equal(res.Data, want[:100]) {
		t.Fatalf("first request: %v", res.Err)
	}
	res := <-queued
	if !errors.Is(res.Err, context.Canceled) || res.Data != nil || res.Bytes != 0 || res.Tag != "queued" {
		t.Fatalf("cancelled queued request: %+v", res)
	}
	for _, ch := range rest {
		if res := <-ch; res.Err != nil || !bytes.Equal(res.Data, want[20:50]) {
			t.Fatalf("queued request: %v", res.Err)
		}
	}
	p.Close()
	waitGoroutines(t, before)
}

// errAfter is a context whose Err reports context.Canceled from its n-th
// call on, so a test can end a read between two chunks.
type errAfter struct {
	context.Context
	mu    sync.Mutex
	calls int
	n     int
}

func (c *errAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func TestReadPoolCancelStopsReadBetweenChunks(t *testing.T) {
	const size = 3 * directChunk
	f, _ := openTestFile(t, size)
	p := NewReadPool(1)
	defer p.Close()
	// Err calls: 1 in Submit, 2 before service, 3 before the first chunk,
	// 4 before the second chunk.
	ctx := &errAfter{Context: context.Background(), n: 4}
	ch, err := p.Submit(ctx, ReadRequest{File: f, Len: size, Slab: newSlab(t, size)})
	if err != nil {
		t.Fatal(err)
	}
	res := <-ch
	if !errors.Is(res.Err, context.Canceled) || res.Data != nil || ctx.calls != 4 {
		t.Fatalf("read cancelled after one chunk: err %v, %d context checks", res.Err, ctx.calls)
	}
}

func TestReadPoolCloseWithRequestsInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	f, want := openTestFile(t, 64<<10)
	p, first, release := blockedPool(t, f)
	var queued []<-chan ReadResult
	for i := range p.QueueDepth() {
		ch, err := p.Submit(context.Background(), ReadRequest{File: f, Off: int64(i), Len: 10, Slab: newSlab(t, 10)})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, ch)
	}
	// A Submit blocked on the full queue is released by Close.
	blocked := make(chan error)
	go func() {
		_, err := p.Submit(context.Background(), ReadRequest{File: f, Len: 1, Slab: newSlab(t, 1)})
		blocked <- err
	}()
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	<-p.done
	if err := <-blocked; !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Submit blocked during Close: %v, want ErrPoolClosed", err)
	}
	close(release)
	<-closed
	if res := <-first; res.Err != nil || !bytes.Equal(res.Data, want[:100]) {
		t.Fatalf("in-flight request: %v", res.Err)
	}
	for i, ch := range queued {
		if res := <-ch; !errors.Is(res.Err, ErrPoolClosed) {
			t.Fatalf("queued request %d: %v, want ErrPoolClosed", i, res.Err)
		}
	}
	if _, err := p.Submit(context.Background(), ReadRequest{File: f, Len: 1, Slab: newSlab(t, 1)}); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Submit after Close: %v, want ErrPoolClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	waitGoroutines(t, before)
}

func TestReadPoolSubmitRejectsBadRequests(t *testing.T) {
	f, _ := openTestFile(t, 8192)
	p := NewReadPool(2)
	defer p.Close()
	slab := newSlab(t, 100)
	cases := []struct {
		name string
		req  ReadRequest
	}{
		{"no file", ReadRequest{Len: 10, Slab: slab}},
		{"negative offset", ReadRequest{File: f, Off: -1, Len: 10, Slab: slab}},
		{"misaligned slab", ReadRequest{File: f, Len: 10, Slab: slab[1:]}},
		{"short slab", ReadRequest{File: f, Off: 4000, Len: 100, Slab: slab[:4096]}},
	}
	for _, c := range cases {
		if _, err := p.Submit(context.Background(), c.req); err == nil {
			t.Errorf("%s: Submit accepted it", c.name)
		}
	}
	ch, err := p.Submit(context.Background(), ReadRequest{File: f, Off: 8000, Len: 500, Slab: slab})
	if err != nil {
		t.Fatal(err)
	}
	var se *ShortReadError
	if res := <-ch; !errors.As(res.Err, &se) || se.Got != 192 {
		t.Fatalf("read past the end: %v, want a ShortReadError with 192 bytes", res.Err)
	}
}

func TestNewReadPoolClampsWorkers(t *testing.T) {
	for _, c := range []struct{ in, want int }{{-1, 1}, {0, 1}, {8, 8}, {1000, MaxReadWorkers}} {
		p := NewReadPool(c.in)
		if p.Workers() != c.want || p.QueueDepth() != c.want*queuePerWorker {
			t.Errorf("NewReadPool(%d): %d workers, depth %d", c.in, p.Workers(), p.QueueDepth())
		}
		p.Close()
	}
}

// TestReadPoolBackgroundWaits: with the one worker busy, a request
// submitted after a background one is still served first.
func TestReadPoolBackgroundWaits(t *testing.T) {
	f, _ := openTestFile(t, 1<<16)
	p := NewReadPool(1)
	defer p.Close()
	var mu sync.Mutex
	var order []string
	hold := make(chan struct{})
	served := func(name string, block bool) func(ReadResult) {
		return func(ReadResult) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if block {
				<-hold
			}
		}
	}
	req := func(name string, bg, block bool) ReadRequest {
		return ReadRequest{File: f, Off: 0, Len: 4096, Slab: newSlab(t, 4096), Background: bg, Done: served(name, block)}
	}
	ctx := context.Background()
	first, err := p.Submit(ctx, req("first", false, true))
	if err != nil {
		t.Fatal(err)
	}
	for { // wait until the worker holds the first request
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	bg, err := p.Submit(ctx, req("background", true, false))
	if err != nil {
		t.Fatal(err)
	}
	fg, err := p.Submit(ctx, req("foreground", false, false))
	if err != nil {
		t.Fatal(err)
	}
	close(hold)
	for _, ch := range []<-chan ReadResult{first, bg, fg} {
		if r := <-ch; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if want := []string{"first", "foreground", "background"}; !slices.Equal(order, want) {
		t.Fatalf("served %v, want %v", order, want)
	}
}

// TestActivityMeter: busy time is the union of service intervals, depth
// their sum, also when workers report a little out of order.
func TestActivityMeter(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var m activityMeter
	m.start(at(0))
	m.start(at(10))
	m.end(at(10), at(30)) // 0-40 busy, 10-30 two deep
	m.end(at(0), at(40))
	m.start(at(100))
	m.start(at(99)) // reported after a later start: the busy span does not run back
	m.end(at(99), at(150))
	m.end(at(100), at(150))
	got := m.snapshot(at(200))
	want := Activity{Busy: 90 * time.Millisecond, Depth: 161 * time.Millisecond}
	if got != want {
		t.Errorf("activity %+v, want %+v", got, want)
	}
	if d := got.Sub(Activity{Busy: 40 * time.Millisecond, Depth: 60 * time.Millisecond}); d != (Activity{Busy: 50 * time.Millisecond, Depth: 101 * time.Millisecond}) {
		t.Errorf("Sub: %+v", d)
	}
}

// TestReadPoolActivity: a pool's depth integral is exactly the sum of its
// reads' service times, and it was busy for part of the span it was
// measured over.
func TestReadPoolActivity(t *testing.T) {
	const size = 1 << 20
	f, _ := openTestFile(t, size)
	p := NewReadPool(3)
	defer p.Close()
	t0 := time.Now()
	before := p.Activity()
	var chans []<-chan ReadResult
	for i := range 12 {
		off := int64(i) * (size / 12)
		ch, err := p.Submit(context.Background(), ReadRequest{File: f, Off: off, Len: size / 12, Slab: newSlab(t, size/12)})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	var service time.Duration
	for _, ch := range chans {
		res := <-ch
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		service += res.Service
	}
	a := p.Activity().Sub(before)
	span := time.Since(t0)
	if a.Depth != service || a.Busy <= 0 || a.Busy > span {
		t.Errorf("activity %+v over %v; the reads' service times sum to %v", a, span, service)
	}
}
