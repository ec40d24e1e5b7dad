package chat

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/tokenizer"
)

// TestRenderedIDs encodes every fixture case's rendering with the fixture
// tokenizer and checks that each control and content marker becomes one
// id of its own, and that decoding gives the prompt back. (The cases'
// "ids" field holds no ids, so the ids are checked this way.)
func TestRenderedIDs(t *testing.T) {
	dir, cases := loadTemplateCases(t)
	tok, err := tokenizer.Load(filepath.Join(dir, "..", "glm52-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	markers := []string{
		"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
		"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
		"<arg_value>", "</arg_value>", "<tool_response>", "</tool_response>", "/nothink",
	}
	markerIDs := map[string]int{}
	for _, m := range markers {
		id, ok := tok.TokenID(m)
		if !ok {
			t.Fatalf("tokenizer has no id for %q", m)
		}
		markerIDs[m] = id
	}
	for _, c := range cases.Cases {
		t.Run(c.name(), func(t *testing.T) {
			ids := tok.Encode(c.Rendered)
			counts := map[int]int{}
			for _, id := range ids {
				counts[id]++
			}
			for _, m := range markers {
				if want, got := strings.Count(c.Rendered, m), counts[markerIDs[m]]; got != want {
					t.Errorf("%q occurs %d times in the prompt but its id %d %d times in the encoding", m, want, markerIDs[m], got)
				}
			}
			if !strings.HasPrefix(c.Rendered, "[gMASK]<sop>") || len(ids) < 2 || ids[0] != markerIDs["[gMASK]"] || ids[1] != markerIDs["<sop>"] {
				t.Errorf("encoding does not start with [gMASK] <sop>: %v", ids[:min(len(ids), 4)])
			}
			if got := tok.Decode(ids, false); got != c.Rendered {
				t.Errorf("decoding the ids gives %q, want the prompt %q", got, c.Rendered)
			}
		})
	}
}
