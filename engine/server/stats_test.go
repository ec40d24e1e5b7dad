package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/status"
)

// events dials the events websocket and skips the hello and first state.
func events(t *testing.T, ts *testServer) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + eventsPath
	conn, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, want := range []string{"hello", "state"} {
		if ev := nextEvent(t, conn, time.Second); ev.Type != want {
			t.Fatalf("got %q, want %q", ev.Type, want)
		}
	}
	return conn
}

type rawEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func nextEvent(t *testing.T, conn *websocket.Conn, within time.Duration) rawEvent {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	var ev rawEvent
	if err := conn.ReadJSON(&ev); err != nil {
		t.Fatalf("no event within %v: %v", within, err)
	}
	return ev
}

// TestStatusFollowsRequests: a streamed chat reports its prompt progress
// (under the chat's own id) before its first token, its end with the figures
// its usage reports, and the ready state at once.
func TestStatusFollowsRequests(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{PrefillChunk: 16}})
	conn := events(t, ts)
	hello := ts.srv.helloEvent().Data.(helloEvent)
	if !hello.Thinking || hello.ContextLength <= 0 {
		t.Errorf("hello %+v: the demo template has a thinking switch and a context", hello)
	}
	long := strings.Repeat("Explain the separator and maxsplit arguments of str.split. ", 8)
	sse := ts.stream(t, "/v1/chat/completions", chatBody(map[string]any{
		"stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": long}},
	}))
	id := decode(t, sse[0].data)["id"].(string)
	usage := decode(t, sse[len(sse)-2].data)["usage"].(map[string]any)

	var prefills []status.PrefillEvent
	var states []status.Status
	var sum *status.RequestSummary
	sawToken := false
	for sum == nil || states[len(states)-1].State != status.Ready {
		ev := nextEvent(t, conn, 5*time.Second)
		switch ev.Type {
		case "prefill":
			var p status.PrefillEvent
			json.Unmarshal(ev.Data, &p)
			if p.ID != id {
				t.Fatalf("prefill event for %q, want %q", p.ID, id)
			}
			if sawToken {
				t.Errorf("prefill event %+v after the first token", p)
			}
			prefills = append(prefills, p)
		case "token":
			sawToken = true
		case "state":
			var st status.Status
			json.Unmarshal(ev.Data, &st)
			states = append(states, st)
		case "request":
			sum = new(status.RequestSummary)
			json.Unmarshal(ev.Data, sum)
		}
	}
	// No ticker runs here (the test serves Handler, not Serve): the
	// ready state can only be the one the request's end published, and
	// it follows the summary.
	if states[len(states)-1].State != status.Ready {
		t.Errorf("the last state %+v, want ready after the summary", states[len(states)-1])
	}
	prompt := int(usage["prompt_tokens"].(float64))
	if len(prefills) < 2 || prefills[len(prefills)-1].Done != prompt || prefills[0].Done >= prompt {
		t.Errorf("prefill events %+v, want progress up to %d", prefills, prompt)
	}
	phases := map[status.Phase]bool{}
	for _, st := range states {
		phases[st.State] = true
	}
	if !phases[status.Prefilling] || !phases[status.Generating] {
		t.Errorf("states %+v: want prefilling and generating before ready", states)
	}
	completion := int(usage["completion_tokens"].(float64))
	decodeMS := usage["decode_ms"].(float64)
	want := float64(completion-1) / (decodeMS / 1000)
	if sum.ID != id || sum.CompletionTokens != completion || sum.PromptTokens != prompt || math.Abs(sum.DecodeTokensPerSecond-want) > want*1e-6 {
		t.Errorf("summary %+v, want %d tokens at %.3f tok/s (usage %v)", sum, completion, want, usage)
	}
	if sum.Finish != "length" && sum.Finish != "stop" {
		t.Errorf("finish %q", sum.Finish)
	}
	if st := ts.srv.Status(); st.State != status.Ready || st.Last == nil || st.Last.ID != id {
		t.Errorf("status after the reply: %+v", st)
	}
}

// TestStatusCancelled: a client that goes away leaves a summary with the
// tokens it got, and the ready state.
func TestStatusCancelled(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	conn := events(t, ts)
	raw, _ := json.Marshal(chatBody(map[string]any{"stream": true, "max_tokens": 400}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(raw)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for {
		if ev := nextEvent(t, conn, 5*time.Second); ev.Type == "token" {
			break
		}
	}
	cancel()
	for {
		ev := nextEvent(t, conn, 5*time.Second)
		if ev.Type != "request" {
			continue
		}
		var sum status.RequestSummary
		json.Unmarshal(ev.Data, &sum)
		if sum.Finish != "cancelled" && sum.Finish != "stop" {
			t.Errorf("finish %q, want cancelled", sum.Finish)
		}
		if sum.CompletionTokens == 0 {
			t.Errorf("summary %+v lost the tokens generated", sum)
		}
		break
	}
	if st := ts.srv.Status(); st.State != status.Ready || len(st.Requests) != 0 {
		t.Errorf("status after the client left: %+v", st)
	}
}
