package local

import (
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/glm"
)

func TestStopMatcher(t *testing.T) {
	cases := []struct {
		pieces []string
		stops  []string
		out    string
		hit    string
	}{
		{[]string{"hello wor", "ld and more"}, []string{"world"}, "hello ", "world"},
		{[]string{"a", "b", "c", "d"}, []string{"bc"}, "a", "bc"},
		{[]string{"abcd"}, []string{"x"}, "abcd", ""},
		{[]string{"ab", "cab", "d"}, []string{"abd", "ca"}, "ab", "ca"},
		{[]string{"wor", "m"}, []string{"world"}, "worm", ""},
		{[]string{"héllo", " wörld"}, []string{"wö"}, "héllo ", "wö"},
	}
	for _, c := range cases {
		m := &stopMatcher{stops: c.stops}
		var out, hit string
		for _, p := range c.pieces {
			o, h := m.write(p)
			out += o
			if h != "" {
				hit = h
				break
			}
		}
		if hit == "" {
			out += m.flush()
		}
		if out != c.out || hit != c.hit {
			t.Errorf("%q / %q: %q %q, want %q %q", c.pieces, c.stops, out, hit, c.out, c.hit)
		}
	}
}

// FuzzTextStreams: the stop matcher and the dialect's parser, as a
// stream chains them, give the same result however the text is cut.
func FuzzTextStreams(f *testing.F) {
	f.Add("hello <tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call> world STOP x", 7, "STOP")
	f.Add("ab<tool_ca", 3, "b<")
	f.Fuzz(func(t *testing.T, text string, cut int, stop string) {
		if stop == "" || cut < 0 || cut > len(text) {
			return
		}
		run := func(pieces []string) (string, string, int) {
			m := &stopMatcher{stops: []string{stop}}
			p := glm.NewParser(glm.Options{Chat: true})
			var out, hit string
			for _, piece := range pieces {
				o, h := m.write(piece)
				end := glm.More
				if h != "" {
					end = glm.Stop
				}
				out += p.Add(o, end).Text
				if h != "" {
					hit = h
					break
				}
			}
			if hit == "" {
				out += p.Add(m.flush(), glm.Stop).Text
			}
			return out, hit, 0
		}
		o1, h1, c1 := run([]string{text})
		o2, h2, c2 := run([]string{text[:cut], text[cut:]})
		if o1 != o2 || h1 != h2 || c1 != c2 {
			t.Fatalf("whole %q %q %d, cut at %d %q %q %d", o1, h1, c1, cut, o2, h2, c2)
		}
		if h1 != "" && strings.Contains(o1, stop) {
			t.Fatalf("output %q holds the stop %q", o1, stop)
		}
	})
}
