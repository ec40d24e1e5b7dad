package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
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
// continue it there and nowhere else (ConnStore).
//
// Each frame's response is answered as a POST of its body would be (the
// server runs it), written to a Socket: the SSE stream becomes frames.

// WriteTimeout bounds one frame's write.
const WriteTimeout = 10 * time.Second

// Frame reads a client frame: it returns the POST /v1/responses body it
// carries (streamed: a socket always streams), or the refusal of a frame
// that is not a response.create.
func Frame(data []byte) ([]byte, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := apiwire.DecodeJSON(data, &head); err != nil {
		return nil, err
	}
	if head.Type != "response.create" {
		return nil, apiwire.Invalid("type", "client events of type %q are not supported: send {\"type\": \"response.create\", ...the fields of a POST /v1/responses}", head.Type)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, apiwire.Invalid("", "the event is not a JSON object: %v", err)
	}
	delete(fields, "type")
	fields["stream"] = json.RawMessage("true")
	return json.Marshal(fields)
}

// Socket answers one frame's response on the connection: it is the
// http.ResponseWriter the response is written to, and turns the SSE stream
// (or the JSON error) written into frames.
type Socket struct {
	conn   *websocket.Conn
	header http.Header
	status int
	buf    []byte
	err    error
}

// NewSocket is the writer of one frame's response on conn.
func NewSocket(conn *websocket.Conn) *Socket { return &Socket{conn: conn, header: http.Header{}} }

// Header is the response's header (the Content-Type tells a stream).
func (rs *Socket) Header() http.Header { return rs.header }

// WriteHeader records the status.
func (rs *Socket) WriteHeader(status int) {
	if rs.status == 0 {
		rs.status = status
	}
}

// Write takes the response's bytes: a stream's complete events go out as
// frames.
func (rs *Socket) Write(b []byte) (int, error) {
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
func (rs *Socket) FlushError() error {
	if rs.err == nil && rs.sse() {
		rs.err = rs.sendEvents()
	}
	return rs.err
}

func (rs *Socket) sse() bool {
	return strings.HasPrefix(rs.header.Get("Content-Type"), "text/event-stream")
}

// sendEvents sends every complete SSE event in buf as one text frame of its
// data; comments (keep-alives) are not sent: the socket has pings.
func (rs *Socket) sendEvents() error {
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

func (rs *Socket) send(data []byte) error {
	rs.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	return rs.conn.WriteMessage(websocket.TextMessage, data)
}

// Finish ends a frame's response: an answer that was not a stream (an
// error before the stream started) becomes an error event.
func (rs *Socket) Finish() error {
	if rs.err != nil || rs.sse() {
		return rs.err
	}
	return rs.sendError(rs.status, rs.buf)
}

// Status is the status of the frame's response: the handler's, or the
// error event's (0 while neither was sent).
func (rs *Socket) Status() int { return rs.status }

// SendError sends the error event of a frame refused before its response
// ran.
func (rs *Socket) SendError(err error) error {
	e := turn.Error(err)
	b, _ := json.Marshal(e.OpenAI())
	return rs.sendError(e.Status, b)
}

// sendError sends an error event: {"type":"error","status":N,"error":{...}}
// with the body of an OpenAI error envelope.
func (rs *Socket) sendError(status int, body []byte) error {
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

type connStoreKey struct{}

// WithConnStore gives a WebSocket-mode connection's requests their
// connection's store: the latest response with store false.
func WithConnStore(ctx context.Context) context.Context {
	return context.WithValue(ctx, connStoreKey{}, NewStore(1))
}

// ConnStore is the store of ctx's connection; nil (which keeps and finds
// nothing) for a request that came on no WebSocket-mode connection.
func ConnStore(ctx context.Context) *Store {
	st, _ := ctx.Value(connStoreKey{}).(*Store)
	return st
}
