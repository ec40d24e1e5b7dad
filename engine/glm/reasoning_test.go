package glm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitReasoning(t *testing.T) {
	tests := []struct {
		name          string
		inThink       bool
		chunks        []string
		wantReasoning string
		wantContent   string
	}{
		{"prompt opened think", true, []string{"let me think", "</think>", "\n\nThe answer."}, "let me think", "The answer."},
		{"no thinking", false, []string{"Hello", " world\n"}, "", "Hello world"},
		{"model opens think", false, []string{"\n<think>", "a\n", "</think>\nb"}, "a", "b"},
		{"tag split across chunks", true, []string{"x</", "th", "ink", ">y"}, "x", "y"},
		{"open tag split", false, []string{"<", "thi", "nk>r</think>c"}, "r", "c"},
		{"lookalike kept", false, []string{"a <b> </thin", "g> <", "thinker"}, "", "a <b> </thing> <thinker"},
		{"stray close dropped in content", false, []string{"a</think>b"}, "", "ab"},
		{"nested open dropped in reasoning", true, []string{"a<think>b</think>c"}, "ab", "c"},
		{"empty think block", true, []string{"</think>", "\n", "ok"}, "", "ok"},
		{"unterminated reasoning", true, []string{"still thinking\n"}, "still thinking", ""},
		{"inner whitespace kept", true, []string{" a\n", "\n", "b ", "</think> c \n\n d\n"}, "a\n\nb", "c \n\n d"},
		{"second block appends", false, []string{"x<think>p</think>y<think>q</think>z"}, "pq", "xyz"},
		{"partial tag at end flushed", false, []string{"a <thi"}, "", "a <thi"},
		{"rune split across chunks", false, []string{"\xe4\xb8", "\xad\xe6\x96\x87 \xe3\x80", "\x80"}, "", "中文"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SplitReasoning(tt.inThink)
			var r, c strings.Builder
			for _, chunk := range tt.chunks {
				dr, dc := s.Write(chunk)
				r.WriteString(dr)
				c.WriteString(dc)
			}
			dr, dc := s.Flush()
			r.WriteString(dr)
			c.WriteString(dc)
			if r.String() != tt.wantReasoning || c.String() != tt.wantContent {
				t.Errorf("reasoning %q content %q, want %q %q", r.String(), c.String(), tt.wantReasoning, tt.wantContent)
			}
		})
	}
}

func TestSplitReasoningStreamsEarly(t *testing.T) {
	s := SplitReasoning(true)
	if r, c := s.Write("abc"); r != "abc" || c != "" {
		t.Errorf("Write(abc) = %q, %q; want the reasoning at once", r, c)
	}
	if r, c := s.Write("d</thi"); r != "d" || c != "" {
		t.Errorf("Write(d</thi) = %q, %q; want d with the partial tag held", r, c)
	}
	if !s.inThink {
		t.Error("InThink() = false before </think> completed")
	}
	if r, c := s.Write("nk>e"); r != "" || c != "e" {
		t.Errorf("Write(nk>e) = %q, %q", r, c)
	}
	if s.inThink {
		t.Error("InThink() = true after </think>")
	}
}

func TestPromptOpensThink(t *testing.T) {
	tests := []struct {
		prompt string
		want   bool
	}{
		{"<|assistant|>\n<think>", true},
		{"<|assistant|>\n<think></think>\n", false},
		{"<|assistant|>", false},
		{"<think>a</think><|user|>q<|assistant|><think>", true},
	}
	for _, tt := range tests {
		if got := PromptOpensThink(tt.prompt); got != tt.want {
			t.Errorf("PromptOpensThink(%q) = %v, want %v", tt.prompt, got, tt.want)
		}
	}
}

// splitAll feeds text in the given chunk sizes and returns the outputs.
func splitAll(inThink bool, text string, sizes []byte) (string, string) {
	s := SplitReasoning(inThink)
	var r, c strings.Builder
	for i := 0; text != ""; i++ {
		n := len(text)
		if len(sizes) > 0 {
			n = min(len(text), int(sizes[i%len(sizes)]%16)+1)
		}
		dr, dc := s.Write(text[:n])
		r.WriteString(dr)
		c.WriteString(dc)
		text = text[n:]
	}
	dr, dc := s.Flush()
	r.WriteString(dr)
	c.WriteString(dc)
	return r.String(), c.String()
}

// FuzzSplitReasoning checks that the output does not depend on how the
// text is cut, that tags never leak, and that nothing else is lost.
func FuzzSplitReasoning(f *testing.F) {
	f.Add(true, "think</think>\ncontent", []byte{1, 2, 3})
	f.Add(false, "a<think> b </think> c <thi", []byte{5})
	f.Add(false, "\xe4\xb8\xad </th</think>", []byte{0, 1})
	f.Fuzz(func(t *testing.T, inThink bool, text string, sizes []byte) {
		wantR, wantC := splitAll(inThink, text, nil)
		gotR, gotC := splitAll(inThink, text, sizes)
		if gotR != wantR || gotC != wantC {
			t.Fatalf("chunked (%q, %q) != whole (%q, %q)", gotR, gotC, wantR, wantC)
		}
		// Dropping a stray tag can join its neighbours into a new one, so
		// only text with a single '<' must come out tag-free.
		if strings.Count(text, "<") <= 1 {
			for _, out := range []string{gotR, gotC} {
				if strings.Contains(out, thinkOpen) || strings.Contains(out, thinkClose) {
					t.Fatalf("output %q from %q holds a think tag", out, text)
				}
			}
		}
		stripped := strings.NewReplacer(thinkOpen, "", thinkClose, "").Replace(text)
		if utf8.ValidString(text) && len(gotR)+len(gotC) > len(stripped) {
			t.Fatalf("output longer than the input without tags: %q %q from %q", gotR, gotC, text)
		}
	})
}
