package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/status"
)

// eventsPath is the websocket endpoint of live engine events.
const eventsPath = "/v1/events"

// Event is one message on the events websocket:
//
//	{"type":"hello","data":{…the /v1/models entry…, "thinking":true}}
//	{"type":"state","data":<Status>}
//	{"type":"prefill","data":<PrefillEvent>}
//	{"type":"request","data":<RequestSummary>}
//	{"type":"token","data":{"id":"chatcmpl-…","content":"…","reasoning":"…"}}
//	{"type":"experts","data":{"map":"<base64>","hits":"<base64>"}}
//
// and whatever is Published: "download" progress, or "state" events
// "stopped" / "loading" sent by the app while no engine is serving.
type Event struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Timing of the events websocket.
const (
	wsStateInterval = time.Second
	// The expert map goes out every wsExpertsInterval while generating (the
	// heat map animates at 10 updates/s) and every wsExpertsIdleTicks
	// intervals otherwise.
	wsExpertsInterval  = 100 * time.Millisecond
	wsExpertsIdleTicks = 20
	wsPingInterval     = 30 * time.Second
	// wsPongWait is how long a subscriber may stay silent (no pong, no
	// message) before it counts as gone and is closed: a few pings.
	wsPongWait        = 75 * time.Second
	wsWriteTimeout    = 10 * time.Second
	wsSubscriberQueue = 256
)

// DefaultMaxSubscribers is the default cap on events websockets, and
// apart on Responses WebSocket-mode connections (Config.MaxSubscribers).
// Each costs two goroutines, its queue and its
// buffers (about 30 KiB), and none holds one of the API's connections.
const DefaultMaxSubscribers = 1024

// hub fans events out to websocket subscribers. A subscriber that falls
// behind loses events rather than slowing generation.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
	n    atomic.Int32
	// ping is the interval of pings to each subscriber; pongWait how long
	// one may stay silent before it is closed (wsPingInterval, wsPongWait;
	// tests shorten them).
	ping, pongWait time.Duration
	// sockets counts the Responses WebSocket-mode connections.
	sockets atomic.Int32
}

func newHub() *hub {
	return &hub{subs: map[chan Event]struct{}{}, ping: wsPingInterval, pongWait: wsPongWait}
}

// active reports whether anyone listens (cheap; checked per token).
func (h *hub) active() bool { return h.n.Load() > 0 }

// subscribe adds a subscriber unless max are subscribed already.
func (h *hub) subscribe(max int) (chan Event, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= max {
		return nil, false
	}
	ch := make(chan Event, wsSubscriberQueue)
	h.subs[ch] = struct{}{}
	h.n.Store(int32(len(h.subs)))
	return ch, true
}

func (h *hub) unsubscribe(ch chan Event) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.n.Store(int32(len(h.subs)))
	h.mu.Unlock()
}

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// helloEvent is the first event of a connection: the served model and
// what the chat may offer.
type helloEvent struct {
	openai.Model
	// Thinking reports whether the model's chat template has a thinking
	// switch (enable_thinking).
	Thinking bool `json:"thinking"`
}

func (s *Server) helloEvent() Event {
	if s.remote != nil {
		return s.remoteHelloEvent()
	}
	return Event{Type: "hello", Data: helloEvent{Model: s.modelObject(), Thinking: s.local.Thinking()}}
}

// run publishes periodic events while anyone listens, until ctx ends.
func (h *hub) run(ctx context.Context, s *Server) {
	stateTick := time.NewTicker(wsStateInterval)
	defer stateTick.Stop()
	expertTick := time.NewTicker(wsExpertsInterval)
	defer expertTick.Stop()
	var last []byte
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-stateTick.C:
			if !h.active() {
				continue
			}
			// Requests publish their own starts and ends; the tick
			// refreshes the rates while they run.
			ev := s.stateEvent()
			if cur, err := json.Marshal(ev.Data); err == nil && !bytes.Equal(cur, last) {
				last = cur
				h.publish(ev)
			}
		case <-expertTick.C:
			e := s.eng.Experts
			if e == nil || !h.active() {
				continue
			}
			if s.Status().State == status.Ready {
				if idle++; idle < wsExpertsIdleTicks {
					continue
				}
			}
			idle = 0
			// The hub is HitBitmap's only reader: reading clears it.
			h.publish(Event{Type: "experts", Data: map[string][]byte{"map": e.ExpertMap(), "hits": e.HitBitmap()}})
		}
	}
}

// handleEvents upgrades to the events websocket. Subscribers have their
// own cap (Config.MaxSubscribers), and a hijacked connection leaves the
// API's connection guard (conns.go), so websockets never take the API's
// connections. A subscriber that answers no ping for pongWait is closed
// (keepAlive; the Responses WebSocket mode uses the same).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	ch, ok := s.hub.subscribe(s.cfg.MaxSubscribers)
	if !ok {
		writeError(w, r, tooManySockets(s.cfg.MaxSubscribers, eventsPath+" websockets"))
		return
	}
	defer s.hub.unsubscribe(ch)
	if !s.stop.addSocket() {
		writeError(w, r, apiwire.ShuttingDown())
		return
	}
	defer s.stop.socketDone()
	up := websocket.Upgrader{CheckOrigin: s.guard.ValidOrigin}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	defer conn.Close()

	// The reader notices the client leaving and answers pings; keepAlive
	// pings and gives up on a peer silent for pongWait.
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	alive := s.hub.keepAlive(ctx, conn)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		conn.SetReadLimit(4096)
		for {
			if _, _, err := readMessage(conn); err != nil {
				return
			}
			alive()
		}
	}()
	write := func(ev Event) error {
		conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		return conn.WriteJSON(ev)
	}
	if write(s.helloEvent()) != nil || write(s.stateEvent()) != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-gone:
			return
		case <-s.stop.draining:
			closeSocket(conn)
			return
		case ev := <-ch:
			if write(ev) != nil {
				return
			}
		}
	}
}

// keepAlive pings conn every ping interval until ctx ends (from its own
// goroutine: WriteControl may run alongside the connection's other
// writes, so a long response does not hold the pings back) and makes its
// reads fail once the peer has answered nothing (no pong, no message) for
// pongWait. Call the returned func after every message read.
func (h *hub) keepAlive(ctx context.Context, conn *websocket.Conn) (alive func()) {
	pongWait := h.pongWait
	alive = func() { conn.SetReadDeadline(time.Now().Add(pongWait)) }
	alive()
	conn.SetPongHandler(func(string) error { alive(); return nil })
	go func() {
		ping := time.NewTicker(h.ping)
		defer ping.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ping.C:
				if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)) != nil {
					return
				}
			}
		}
	}()
	return alive
}

// errInvalidUTF8 is a text frame whose payload is not UTF-8.
var errInvalidUTF8 = errors.New("server: a websocket text frame is not valid UTF-8")

// readMessage reads conn's next message. A text message that is not UTF-8
// fails the connection with 1007 (invalid frame payload data), as RFC
// 6455 requires of an endpoint (gorilla/websocket leaves the check to its
// caller).
func readMessage(conn *websocket.Conn) (int, []byte, error) {
	typ, data, err := conn.ReadMessage()
	if err == nil && typ == websocket.TextMessage && !utf8.Valid(data) {
		msg := websocket.FormatCloseMessage(websocket.CloseInvalidFramePayloadData, "a text frame is not valid UTF-8")
		conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(wsWriteTimeout))
		return typ, nil, errInvalidUTF8
	}
	return typ, data, err
}

// acquireSocket takes one of max places for a Responses WebSocket-mode
// connection (counted apart from the events subscribers and from the
// API's connections, which a hijacked connection leaves).
func (h *hub) acquireSocket(max int) (release func(), ok bool) {
	if h.sockets.Add(1) > int32(max) {
		h.sockets.Add(-1)
		return nil, false
	}
	return func() { h.sockets.Add(-1) }, true
}

// tooManySockets refuses a websocket past its cap.
func tooManySockets(max int, what string) *apiwire.Error {
	return &apiwire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "too_many_subscribers",
		Message: fmt.Sprintf("%d clients already hold %s; retry shortly", max, what), RetryAfter: 1}
}
