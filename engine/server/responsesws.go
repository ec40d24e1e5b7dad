package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/apiwire"
)

// The Responses API's WebSocket mode: a client (the OpenAI Agents SDK's
// OpenAIResponsesWSModel, Codex, Copilot CLI) opens GET /v1/responses with
// Upgrade: websocket and sends {"type": "response.create", ...the fields of
// a POST /v1/responses...} text frames, one response at a time; the stream
// events of that response come back as text frames, each the JSON of one
// event (the SSE stream's data), ending with response.completed,
// response.incomplete or an error event. previous_response_id continues a
// stored response, on the same connection or any other.
//
// A response with store false is kept on its connection only (the latest
// one, as OpenAI's WebSocket mode keeps it), so previous_response_id can
// continue it there and nowhere else.
//
// Each response.create runs handleResponses itself, unchanged: the same
// turn, limits, parse gate, conversation pre-scan and store as a POST. The
// upgrade passed the guard like any request (host, origin, API key); frames
// are bounded by the body limit.

// responsesSocket answers a frame's response: it turns the SSE stream (or
// the JSON error) that handleResponses writes into websocket frames.
type responsesSocket struct {
	conn   *websocket.Conn
	header http.Header
	status int
	buf    []byte
	err    error
}

func (rs *responsesSocket) Header() http.Header { return rs.header }

func (rs *responsesSocket) WriteHeader(status int) {
	if rs.status == 0 {
		rs.status = status
	}
}

func (rs *responsesSocket) Write(b []byte) (int, error) {
	if rs.status == 0 {
		rs.status = http.StatusOK
	}
	if rs.err != nil {
		return 0, rs.err
	}
	rs.buf = append(rs.buf, b...)
	if rs.sse() {
		rs.err = rs.sendEvents()
	}
	return len(b), rs.err
}

// FlushError sends the events written so far (http.ResponseController's
// Flush calls it).
func (rs *responsesSocket) FlushError() error {
	if rs.err == nil && rs.sse() {
		rs.err = rs.sendEvents()
	}
	return rs.err
}

func (rs *responsesSocket) sse() bool {
	return strings.HasPrefix(rs.header.Get("Content-Type"), "text/event-stream")
}

// sendEvents sends every complete SSE event in buf as one text frame of its
// data; comments (keep-alives) are not sent: the socket has pings.
func (rs *responsesSocket) sendEvents() error {
	for {
		i := bytes.Index(rs.buf, []byte("\n\n"))
		if i < 0 {
			return nil
		}
		block := rs.buf[:i]
		rs.buf = rs.buf[i+2:]
		for _, line := range bytes.Split(block, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				if err := rs.send(data); err != nil {
					return err
				}
			}
		}
	}
}

func (rs *responsesSocket) send(data []byte) error {
	rs.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return rs.conn.WriteMessage(websocket.TextMessage, data)
}

// finish ends a frame's response: an answer that was not a stream (an
// error before the stream started) becomes an error event.
func (rs *responsesSocket) finish() error {
	if rs.err != nil || rs.sse() {
		return rs.err
	}
	return rs.sendError(rs.status, rs.buf)
}

// sendError sends an error event: {"type":"error","status":N,"error":{...}}
// with the body of an OpenAI error envelope.
func (rs *responsesSocket) sendError(status int, body []byte) error {
	if rs.status == 0 {
		rs.status = status
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		env.Error, _ = json.Marshal(apiwire.OpenAIErrorBody{Message: strings.TrimSpace(string(body)), Type: "server_error"})
	}
	ev, _ := json.Marshal(map[string]any{"type": "error", "status": status, "error": env.Error})
	return rs.send(ev)
}

// handleResponsesSocket upgrades GET /v1/responses to the WebSocket mode.
func (s *Server) handleResponsesSocket(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, r, &apiError{Status: http.StatusUpgradeRequired, Type: "invalid_request_error", Code: "websocket_required",
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
		writeError(w, r, shuttingDown())
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
	ctx = context.WithValue(ctx, socketResponsesKey{}, newResponseStore(1))
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
	rs := &responsesSocket{conn: conn, header: http.Header{}}
	// Each response is a request of its own in the access log.
	rec := &accessRecord{start: time.Now(), method: "WS", path: upgrade.URL.Path, client: upgrade.RemoteAddr, agent: upgrade.UserAgent(),
		health: s.health, endpoint: "WS /v1/responses response.create"}
	ctx = context.WithValue(ctx, accessKey{}, rec)
	defer func() { s.logAccess(rec, rs.status) }()
	errorBody := func(err error) []byte {
		b, _ := json.Marshal(failed(ctx, err).OpenAI())
		return b
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := decodeJSON(data, &head); err != nil {
		return rs.sendError(http.StatusBadRequest, errorBody(err))
	}
	if head.Type != "response.create" {
		return rs.sendError(http.StatusBadRequest, errorBody(invalid("type",
			"client events of type %q are not supported: send {\"type\": \"response.create\", ...the fields of a POST /v1/responses}", head.Type)))
	}
	// The frame is the POST body, streamed (a socket always streams).
	body, err := withStreamTrue(data)
	if err != nil {
		return rs.sendError(http.StatusBadRequest, errorBody(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/responses", nil)
	if err != nil {
		return rs.sendError(http.StatusInternalServerError, errorBody(internalError(err)))
	}
	req.Header = upgrade.Header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Host, req.RemoteAddr = upgrade.Host, upgrade.RemoteAddr
	// The same limits as a POST: the conversation pre-scan and a parse
	// slot while the body is decoded and tokenized.
	req, done, ok := s.guard.Admit(rs, req, body)
	if !ok {
		return rs.finish()
	}
	defer done()
	s.handleResponses(rs, req)
	return rs.finish()
}

// withStreamTrue returns the frame with "stream": true and without its
// "type" (the POST body it carries).
func withStreamTrue(frame []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(frame, &fields); err != nil {
		return nil, invalid("", "the event is not a JSON object: %v", err)
	}
	delete(fields, "type")
	fields["stream"] = json.RawMessage("true")
	return json.Marshal(fields)
}

type socketResponsesKey struct{}

// socketResponses is the connection-local store of a WebSocket-mode
// request's connection; nil (which keeps and finds nothing) for any other
// request.
func socketResponses(ctx context.Context) *responseStore {
	st, _ := ctx.Value(socketResponsesKey{}).(*responseStore)
	return st
}
