package server

import (
	"context"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/responses"
	"github.com/spoolhq/spool/engine/apiwire"
)

// The Responses API's WebSocket mode (engine/api/responses): each
// response.create frame runs handleResponses itself, unchanged: the same
// turn, limits, parse gate, conversation pre-scan and store as a POST. The
// upgrade passed the guard like any request (host, origin, API key);
// frames are bounded by the body limit.

// handleResponsesSocket upgrades GET /v1/responses to the WebSocket mode.
func (s *Server) handleResponsesSocket(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, r, &apiwire.Error{Status: http.StatusUpgradeRequired, Type: "invalid_request_error", Code: "websocket_required",
			Message: "GET /v1/responses is the Responses API's WebSocket mode: connect with a websocket client (Upgrade: websocket), or POST a response"})
		return
	}
	release, ok := s.hub.acquireSocket(s.cfg.MaxSubscribers)
	if !ok {
		writeError(w, r, tooManySockets(s.cfg.MaxSubscribers, "Responses WebSocket-mode connections"))
		return
	}
	defer release()
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
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Pings from their own goroutine, and a peer silent past the pong
	// wait ends the connection (ws.go).
	alive := s.hub.keepAlive(ctx, conn)

	// The reader owns reads: it hands frames over one at a time and ends
	// the connection's context when the client leaves, which cancels a
	// response in progress.
	frames := make(chan []byte)
	go func() {
		defer cancel()
		conn.SetReadLimit(s.cfg.MaxBodyBytes)
		for {
			// A reader held back by a long response starts its wait
			// afresh.
			alive()
			_, data, err := readMessage(conn)
			if err != nil {
				return
			}
			select {
			case frames <- data:
			case <-ctx.Done():
				return
			}
		}
	}()
	ctx = responses.WithConnStore(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop.draining:
			// Between responses: a response in progress ended first
			// (drained or cut with an error event).
			closeSocket(conn)
			return
		case data := <-frames:
			if s.responseFrame(ctx, conn, r, data) != nil {
				return
			}
		}
	}
}

// responseFrame answers one client frame; an error means the socket failed.
func (s *Server) responseFrame(ctx context.Context, conn *websocket.Conn, upgrade *http.Request, data []byte) error {
	rs := responses.NewSocket(conn)
	// Each response is a request of its own in the access log.
	rec := access.NewRecord(upgrade, "WS", s.health)
	rec.SetEndpoint("WS /v1/responses response.create")
	ctx = access.With(ctx, rec)
	defer func() { rec.Log(s.log, rs.Status()) }()
	fail := func(err error) error { return rs.SendError(failed(upgrade.WithContext(ctx), err)) }
	body, err := responses.Frame(data)
	if err != nil {
		return fail(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/responses", nil)
	if err != nil {
		return fail(apiwire.Internal(err))
	}
	req.Header = upgrade.Header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Host, req.RemoteAddr = upgrade.Host, upgrade.RemoteAddr
	// The same limits as a POST: the conversation pre-scan and a parse
	// slot while the body is decoded and tokenized.
	req, done, ok := s.guard.Admit(rs, req, body)
	if !ok {
		return rs.Finish()
	}
	defer done()
	s.handleResponses(rs, req)
	return rs.Finish()
}
