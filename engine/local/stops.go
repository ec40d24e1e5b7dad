package local

import "strings"

// stopMatcher finds stop strings in generated text that arrives in pieces.
// Text that could be the start of a stop string is held back until the
// next piece decides; the stop string itself is never emitted.
type stopMatcher struct {
	stops []string
	held  string
}

// write consumes a piece and returns the text that can be emitted; hit
// reports that a stop string completed (its text and what follows are
// dropped).
func (m *stopMatcher) write(text string) (out, hit string) {
	if len(m.stops) == 0 {
		return text, ""
	}
	buf := m.held + text
	at := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (at < 0 || i < at || (i == at && len(s) > len(hit))) {
			at, hit = i, s
		}
	}
	if at >= 0 {
		m.held = ""
		return buf[:at], hit
	}
	keep := 0
	for _, s := range m.stops {
		for n := min(len(buf), len(s)-1); n > keep; n-- {
			if strings.HasPrefix(s, buf[len(buf)-n:]) {
				keep = n
				break
			}
		}
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], ""
}

// flush returns the held-back text at the end of generation.
func (m *stopMatcher) flush() string {
	out := m.held
	m.held = ""
	return out
}

// end flushes the decoder's tail through the matcher and releases
// whatever it still holds: generation is over, so no stop can complete.
func (m *stopMatcher) end(tail string) string {
	out, hit := m.write(tail)
	if hit != "" {
		return out
	}
	return out + m.flush()
}
