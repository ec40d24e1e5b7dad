package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/local"
)

// A server stops in two steps (Serve, when its context ends). First it
// drains: it takes no new generation (503 with Retry-After), refuses the
// ones still queued at once (they have not started, and a client can
// retry them elsewhere or later), lets the running ones go on, and closes
// idle websockets with 1001. When every running generation has ended, or
// the grace period (Config.ShutdownGrace) has passed, the ones left are
// cut: each ends the way every API tells a client that the server failed
// it, a 503 with Retry-After before the answer began and the stream's
// error event after, never an answer that looks complete. Request
// contexts are not the server's: they end only when their client leaves.

// DefaultShutdownGrace is how long a stopping server lets the generations
// in flight run before it cuts them (Config.ShutdownGrace).
const DefaultShutdownGrace = 10 * time.Second

// shutdownTail bounds, past the grace period, the wait for cut requests
// to write their error and for websockets to close.
const shutdownTail = 5 * time.Second

// stopper tracks the generations and websockets a stopping server waits
// for.
type stopper struct {
	mu       sync.Mutex
	draining chan struct{}  // closed when the server starts to stop
	cut      chan struct{}  // closed when the grace period ends
	flights  map[any]flight // by its stream (or remote request)
	idle     chan struct{}  // signalled when a flight ends
	sockets  sync.WaitGroup
	begun    bool
	cutDone  bool
}

func newStopper() *stopper {
	return &stopper{draining: make(chan struct{}), cut: make(chan struct{}), flights: map[any]flight{}, idle: make(chan struct{}, 1)}
}

// flight is a request a stopping server waits for: queued reports one
// not started yet, cancel ends it.
type flight struct {
	queued func() bool
	cancel func()
}

// turnFlight is a turn of the local engine: a cut ends it with
// apiwire.ShuttingDown, which its reader answers.
func turnFlight(st *local.Stream) flight {
	return flight{queued: st.Queued, cancel: func() { st.Stop(apiwire.ShuttingDown()) }}
}

// add registers a submitted generation (key: its stream); false means
// the server is stopping and takes none.
func (sp *stopper) add(key any, f flight) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.begun {
		return false
	}
	sp.flights[key] = f
	return true
}

// done unregisters a generation that has ended.
func (sp *stopper) done(key any) {
	sp.mu.Lock()
	delete(sp.flights, key)
	sp.mu.Unlock()
	select {
	case sp.idle <- struct{}{}:
	default:
	}
}

// addSocket registers a websocket the stop waits for; false means the
// server is stopping and takes none. Call socketDone when it ends.
func (sp *stopper) addSocket() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.begun {
		return false
	}
	sp.sockets.Add(1)
	return true
}

func (sp *stopper) socketDone() { sp.sockets.Done() }

// stopping reports whether the server has started to stop.
func (sp *stopper) stopping() bool {
	select {
	case <-sp.draining:
		return true
	default:
		return false
	}
}

// begin starts the drain: no new generation, and the queued ones are
// refused (cancelled: their handlers answer apiwire.ShuttingDown).
func (sp *stopper) begin() {
	sp.mu.Lock()
	if sp.begun {
		sp.mu.Unlock()
		return
	}
	sp.begun = true
	close(sp.draining)
	var queued []flight
	for _, f := range sp.flights {
		if f.queued() {
			queued = append(queued, f)
		}
	}
	sp.mu.Unlock()
	for _, f := range queued {
		f.cancel()
	}
}

// cutAll ends the grace period: every generation still running is
// cancelled.
func (sp *stopper) cutAll() {
	sp.mu.Lock()
	if sp.cutDone {
		sp.mu.Unlock()
		return
	}
	sp.cutDone = true
	close(sp.cut)
	running := make([]flight, 0, len(sp.flights))
	for _, f := range sp.flights {
		running = append(running, f)
	}
	sp.mu.Unlock()
	for _, f := range running {
		f.cancel()
	}
}

// drain waits until no generation runs or grace has passed, then cuts
// the ones left.
func (sp *stopper) drain(grace time.Duration) {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		sp.mu.Lock()
		n := len(sp.flights)
		sp.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-sp.idle:
		case <-timer.C:
			sp.cutAll()
			return
		}
	}
	sp.cutAll()
}

// withStop makes a request forwarded to a remote engine one a stopping
// server waits for, and cuts at the end of the grace period by ending its
// context with apiwire.ShuttingDown as the cause, which the remote front
// and the glue answer (turn.Stopped). One arriving while the server stops
// is refused. Ending the context of a request also serves to cut the
// local engine's embeddings (embed.go).
func withStop(h func(*Server, http.ResponseWriter, *http.Request)) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		key := new(int)
		if !s.stop.add(key, flight{queued: func() bool { return false }, cancel: func() { cancel(apiwire.ShuttingDown()) }}) {
			writeError(w, r, apiwire.ShuttingDown())
			return
		}
		defer s.stop.done(key)
		h(s, w, r.WithContext(ctx))
	}
}

// shutdown stops srv: it drains the generations for up to the grace
// period and cuts the rest, then waits (bounded) for the handlers and the
// websockets to end.
func (s *Server) shutdown(srv *http.Server) {
	s.stop.begin()
	grace := s.cfg.ShutdownGrace
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.stop.drain(grace)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), grace+shutdownTail)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
	<-drained
	sockets := make(chan struct{})
	go func() {
		defer close(sockets)
		s.stop.sockets.Wait()
	}()
	select {
	case <-sockets:
	case <-ctx.Done():
	}
}

// closeSocket ends a websocket of a stopping server with 1001 (going
// away), as the protocol says a server that goes down does.
func closeSocket(conn *websocket.Conn) {
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "the server is shutting down")
	conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(wsWriteTimeout))
}
