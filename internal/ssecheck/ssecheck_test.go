package ssecheck

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		events       []string // names and data, "name|data"
		bad          bool
	}{
		{name: "data events", stream: "data: {\"a\":1}\n\ndata: [DONE]\n\n", events: []string{"|{\"a\":1}", "|[DONE]"}},
		{name: "named events", stream: "event: ping\ndata: {}\n\n", events: []string{"ping|{}"}},
		{name: "comment line before an event", stream: ": keep-alive\ndata: x\n\n", events: []string{"|x"}},
		{name: "comments between events", stream: "data: x\n\n: a\n: b\ndata: y\n\n", events: []string{"|x", "|y"}},
		{name: "CRLF and CR line ends", stream: "data: x\r\n\r\ndata: y\r\r", events: []string{"|x", "|y"}},
		{name: "multi-line data", stream: "data: a\ndata: b\n\n", events: []string{"|a\nb"}},
		{name: "no space after the colon", stream: "data:x\n\n", events: []string{"|x"}},
		{name: "an event never completed", stream: "data: x\n\ndata: y\n", events: []string{"|x"}},
		{name: "comment with its blank line", stream: ": spool\n\ndata: x\n\n", bad: true},
		{name: "a blank line alone", stream: "data: x\n\n\n", bad: true},
		{name: "an event with a name and no data", stream: "event: ping\n\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := Check([]byte(tc.stream))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted; events %+v", evs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Name+"|"+ev.Data)
			}
			if strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %q, want %q", got, tc.events)
			}
		})
	}
}

// FuzzCheck: any stream is read without a panic, and what Check accepts
// reads the same both ways, with data in every event.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("data: x\n\n: c\ndata: y\r\n\r\n"))
	f.Add([]byte(": spool\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := Check(b)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if !ev.HasData {
				t.Fatalf("accepted an event without data: %+v", ev)
			}
		}
	})
}
