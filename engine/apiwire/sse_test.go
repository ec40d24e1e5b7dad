package apiwire

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spoolhq/spool/internal/ssecheck"
)

// TestSSEStrictClients: a stream with its opening, keep-alives between and
// before events, data and named events and the end marker reads the same
// to a spec parser and to a client that dispatches every blank line
// (openai-go v1.x), which failed on ": spool\n\n" after 0 chunks.
func TestSSEStrictClients(t *testing.T) {
	rec := httptest.NewRecorder()
	sse, err := StartSSE(rec)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { return sse.Comment("keep-alive") },
		func() error { return sse.Comment("keep-alive") },
		func() error { return sse.Data(map[string]int{"n": 1}) },
		func() error { return sse.Comment("keep-alive") },
		func() error { return sse.Event("ping", map[string]string{"type": "ping"}) },
		func() error { return sse.Data(map[string]int{"n": 2}) },
		func() error { return sse.Comment("keep-alive") },
		sse.Done,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" || !rec.Flushed {
		t.Errorf("status %d, type %q, flushed %v", rec.Code, rec.Header().Get("Content-Type"), rec.Flushed)
	}
	evs, err := ssecheck.Check(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, rec.Body)
	}
	want := []ssecheck.Event{{Data: `{"n":1}`}, {Name: "ping", Data: `{"type":"ping"}`}, {Data: `{"n":2}`}, {Data: "[DONE]"}}
	if len(evs) != len(want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
	for i, ev := range evs {
		if ev.Name != want[i].Name || ev.Data != want[i].Data {
			t.Errorf("event %d: %+v, want %+v", i, ev, want[i])
		}
	}
}

// TestSSEHeadersFirst: a stream's headers reach the client before any
// event (a long prefill follows), with no bytes of the body yet.
func TestSSEHeadersFirst(t *testing.T) {
	rec := httptest.NewRecorder()
	if _, err := StartSSE(rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed || rec.Body.Len() != 0 {
		t.Errorf("flushed %v, body %q: want the headers flushed alone", rec.Flushed, rec.Body)
	}
}
