package httpguard

import (
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
)

// Requests are parsed (body decoded, template rendered, prompt tokenized)
// a few at a time: a parse holds memory proportional to its body, so an
// unbounded number of concurrent large bodies is an unbounded heap. The
// parse phase of a request ends when it is submitted to the scheduler or
// answered, whichever comes first.

// defaultParsing is the default number of requests parsed at once.
func defaultParsing() int { return max(2, min(runtime.GOMAXPROCS(0), 4)) }

// parseWait is how long a request waits for a parse slot before it is
// answered 503.
const parseWait = 30 * time.Second

// bigBody is the body size past which a request asks for its memory to be
// returned to the OS once no body is held.
const bigBody = 1 << 20

// parseGate bounds concurrent parses and gives the memory of a burst of
// large bodies back to the OS when it ends.
type parseGate struct {
	slots chan struct{}

	mu       sync.Mutex
	active   int       // parse slots taken
	holding  int       // requests whose body is in memory and not yet parsed
	big      bool      // a large body was held since the last scavenge
	lastFree time.Time // when memory was last given back
}

// hold counts a request whose body of size bytes (-1: unknown) is about to
// be read into memory; release (idempotent) says it is garbage now.
func (g *parseGate) hold(size int64) (release func()) {
	g.mu.Lock()
	g.holding++
	if size > bigBody || size < 0 {
		g.big = true
	}
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.holding--
			g.mu.Unlock()
			g.maybeFree()
		})
	}
}

// maybeFree gives the heap back to the OS when the last large body of a
// burst became garbage (at most every 2 s).
func (g *parseGate) maybeFree() {
	g.mu.Lock()
	free := g.active == 0 && g.holding == 0 && g.big && time.Since(g.lastFree) > 2*time.Second
	if free {
		g.big = false
		g.lastFree = time.Now()
	}
	g.mu.Unlock()
	if free {
		// The heap of a burst of large bodies is garbage now; return it
		// rather than keep the high-water mark resident. FreeOSMemory
		// runs a GC: it returns on its own.
		go debug.FreeOSMemory()
	}
}

func newParseGate(n int) *parseGate { return &parseGate{slots: make(chan struct{}, n)} }

// acquire waits for a parse slot; release (idempotent) frees it.
func (g *parseGate) acquire(ctx context.Context) (release func(), err error) {
	timer := time.NewTimer(parseWait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, apiwire.Unavailable("the server is busy reading other requests; retry shortly")
	}
	g.mu.Lock()
	g.active++
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(g.release) }, nil
}

func (g *parseGate) release() {
	<-g.slots
	g.mu.Lock()
	g.active--
	g.mu.Unlock()
	g.maybeFree()
}

type parseReleaseKey struct{}

// holdBody counts the body of a POST as held in memory (see parseGate.hold).
func (s *Guard) holdBody(r *http.Request) func() {
	if s.parsing == nil || r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return func() {}
	}
	return s.parsing.hold(r.ContentLength)
}

// withParseSlot takes a parse slot for a request with a body and returns
// the request carrying the release of the slot and of the body's hold
// (endParsing calls it); done releases it when the handler returns.
func (s *Guard) withParseSlot(w http.ResponseWriter, r *http.Request, held func()) (*http.Request, func(), bool) {
	if s.parsing == nil || r.Body == nil || r.Body == http.NoBody || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return r, func() {}, true
	}
	release, err := s.parsing.acquire(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return nil, nil, false
	}
	done := func() {
		release()
		held()
	}
	return r.WithContext(context.WithValue(r.Context(), parseReleaseKey{}, done)), done, true
}

// endParsing releases the request's parse slot (its prompt is ready).
func endParsing(ctx context.Context) {
	if release, ok := ctx.Value(parseReleaseKey{}).(func()); ok {
		release()
	}
}
