package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// socketResponse sends one client event and reads the events answered, to
// a terminal one.
func socketResponse(t *testing.T, conn *websocket.Conn, event map[string]any) []map[string]any {
	t.Helper()
	if err := conn.WriteJSON(event); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for {
		var ev map[string]any
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, ev)
		switch ev["type"] {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return out
		}
	}
}

// TestResponsesSocket: the Responses API's WebSocket mode answers
// response.create with the POST's stream events (greedy text equal to the
// POST's), continues previous_response_id on the same connection, answers
// bad events with error events without dropping the connection, and keeps
// the guard's key and origin checks.
func TestResponsesSocket(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{APIKey: "k"}})
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/responses"
	auth := http.Header{"Authorization": {"Bearer k"}}
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp.StatusCode != 401 {
		t.Errorf("no key: %v %v", err, resp)
	}
	evil := http.Header{"Authorization": {"Bearer k"}, "Origin": {"https://evil.example.com"}}
	if _, resp, err := websocket.DefaultDialer.Dial(url, evil); err == nil || resp.StatusCode != 403 {
		t.Errorf("foreign origin: %v %v", err, resp)
	}
	if status, body, _ := ts.do(t, "GET", "/v1/responses", nil); status != http.StatusUpgradeRequired || !strings.Contains(jpath(body, "error", "message").(string), "WebSocket mode") {
		t.Errorf("plain GET: %d %v", status, body)
	}

	conn, _, err := websocket.DefaultDialer.Dial(url, auth)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	create := map[string]any{"type": "response.create", "model": "glm52-mini", "input": question, "max_output_tokens": 24, "temperature": 0}
	events := socketResponse(t, conn, create)
	if events[0]["type"] != "response.created" || events[len(events)-1]["type"] == "error" {
		t.Fatalf("events %v", events)
	}
	var streamed string
	for i, ev := range events {
		if ev["sequence_number"] != float64(i) {
			t.Errorf("event %d has sequence_number %v", i, ev["sequence_number"])
		}
		if ev["type"] == "response.output_text.delta" {
			streamed += ev["delta"].(string)
		}
	}
	final := events[len(events)-1]["response"].(map[string]any)
	post := map[string]any{"model": "glm52-mini", "input": question, "max_output_tokens": 24, "temperature": 0}
	_, whole, _ := ts.do(t, "POST", "/v1/responses", post)
	if streamed == "" || streamed != whole["output_text"] || final["output_text"] != streamed {
		t.Errorf("socket %q (final %q) != POST %q", streamed, final["output_text"], whole["output_text"])
	}

	// An unknown event and a bad request are error events; the socket stays.
	bad := socketResponse(t, conn, map[string]any{"type": "session.update"})
	if len(bad) != 1 || bad[0]["status"] != float64(400) || !strings.Contains(jpath(bad[0], "error", "message").(string), "response.create") {
		t.Errorf("unknown event: %v", bad)
	}
	bad = socketResponse(t, conn, map[string]any{"type": "response.create", "model": "gpt-9", "input": "x"})
	if len(bad) != 1 || bad[0]["status"] != float64(404) || jpath(bad[0], "error", "code") != "model_not_found" {
		t.Errorf("unknown model: %v", bad)
	}

	// previous_response_id continues on the same connection.
	next := socketResponse(t, conn, map[string]any{"type": "response.create", "model": "glm52-mini", "previous_response_id": final["id"],
		"input": []any{map[string]any{"role": "user", "content": "And os.path.split?"}}, "max_output_tokens": 8, "temperature": 0})
	last := next[len(next)-1]
	if last["type"] == "error" {
		t.Fatalf("continuation: %v", last)
	}
	prev := jpath(final, "usage", "input_tokens").(float64) + jpath(final, "usage", "output_tokens").(float64)
	if got := jpath(last, "response", "usage", "input_tokens").(float64); got <= prev || jpath(last, "response", "previous_response_id") != final["id"] {
		t.Errorf("continuation has %v input tokens (the first turn had %v in all): %v", got, prev, last["response"])
	}
	// A response with store false continues on its connection only.
	unstored := socketResponse(t, conn, map[string]any{"type": "response.create", "model": "glm52-mini", "input": question, "store": false, "max_output_tokens": 4, "temperature": 0})
	id := jpath(unstored[len(unstored)-1], "response", "id")
	if status, _, _ := ts.do(t, "GET", "/v1/responses/"+id.(string), nil); status != 404 {
		t.Errorf("an unstored response is served by GET: %d", status)
	}
	again := socketResponse(t, conn, map[string]any{"type": "response.create", "model": "glm52-mini", "previous_response_id": id, "input": "More?", "max_output_tokens": 4, "temperature": 0})
	if ev := again[len(again)-1]; ev["type"] == "error" {
		t.Errorf("continuing an unstored response on its connection: %v", ev)
	}
	other, _, err := websocket.DefaultDialer.Dial(url, auth)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	elsewhere := socketResponse(t, other, map[string]any{"type": "response.create", "model": "glm52-mini", "previous_response_id": id, "input": "More?", "max_output_tokens": 4})
	if ev := elsewhere[len(elsewhere)-1]; ev["type"] != "error" || jpath(ev, "error", "code") != "previous_response_not_found" {
		t.Errorf("an unstored response continued on another connection: %v", ev)
	}

	raw, _ := json.Marshal(last["response"])
	if !strings.Contains(string(raw), `"status":"completed"`) && !strings.Contains(string(raw), `"status":"incomplete"`) {
		t.Errorf("continuation response %s", raw)
	}
}

// TestSocketsRefuseInvalidUTF8: a text frame that is not UTF-8 fails the
// connection with 1007 (invalid frame payload data), as RFC 6455 requires
// of an endpoint, on the Responses WebSocket and on the events websocket.
func TestSocketsRefuseInvalidUTF8(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	for _, path := range []string{"/v1/responses", eventsPath} {
		conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"response.create\",\"input\":\"\xff\xfe\"}")); err != nil {
			t.Fatal(err)
		}
		for {
			_, _, err := conn.ReadMessage()
			if err == nil {
				continue // the events socket's hello and state
			}
			if !websocket.IsCloseError(err, websocket.CloseInvalidFramePayloadData) {
				t.Errorf("%s: the connection ended with %v, want a 1007 close", path, err)
			}
			break
		}
		conn.Close()
	}
}
