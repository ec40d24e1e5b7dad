package grammar

import (
	"errors"
	"fmt"
	"math"
)

// ErrEnded is returned by Accept after an end-of-sequence token was accepted.
var ErrEnded = errors.New("grammar: the output has ended")

// Matcher follows one request's output. It is not safe for concurrent use;
// Clone it to explore alternatives.
type Matcher struct {
	g       *Grammar
	v       *Vocab
	st      state
	scratch []state // per trie depth during Allowed; [0..1] during Accept
	snap    []frame
	ended   bool
}

// NewMatcher starts matching an empty output.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	return &Matcher{g: g, v: v, st: g.initial()}
}

// Clone returns an independent copy of m.
func (m *Matcher) Clone() *Matcher {
	c := &Matcher{g: m.g, v: m.v, ended: m.ended}
	c.st.copyFrom(&m.st)
	return c
}

// Done reports whether the output so far is a complete value, so that an
// end-of-sequence token is allowed.
func (m *Matcher) Done() bool {
	if m.ended {
		return true
	}
	for i := range m.st.ends {
		if m.g.canEnd(m.st.thread(i)) {
			return true
		}
	}
	return false
}

// Ended reports whether an end-of-sequence token has been accepted.
func (m *Matcher) Ended() bool { return m.ended }

// Allowed fills mask (at least Vocab.MaskWords() words) with the set of
// token ids that keep the output a prefix of a valid value: bit id%64 of
// word id/64. End-of-sequence ids are set exactly when Done.
func (m *Matcher) Allowed(mask []uint64) {
	words := m.v.MaskWords()
	mask = mask[:words]
	if m.ended {
		clear(mask)
		return
	}
	m.ensureScratch()
	// Plain string content tokens come from the precomputed bitsets for the
	// threads inside a string or a free key; only the other threads walk
	// the trie of plain tokens. Every thread walks the trie of the rest.
	budget := -1
	walkers := &m.scratch[0]
	walkers.reset()
	for i := range m.st.ends {
		t := m.st.thread(i)
		if k, ok := m.g.plainBudget(t); ok {
			budget = max(budget, k)
			continue
		}
		walkers.frames = append(walkers.frames, t...)
		walkers.ends = append(walkers.ends, int32(len(walkers.frames)))
	}
	if budget >= 0 {
		copy(mask, m.v.plain[min(budget, len(m.v.plain)-1)])
		if m.g.raw {
			for i := range mask {
				mask[i] &^= m.v.angle[i]
			}
		}
	} else {
		clear(mask)
	}
	if len(walkers.ends) > 0 {
		m.walk(&m.v.plainTrie, 0, 0, mask)
	}
	m.scratch[0].copyFrom(&m.st)
	m.walk(&m.v.rest, 0, 0, mask)
	if m.Done() {
		for _, id := range m.v.eos {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
}

// plainBudget reports whether thread t is between characters of a string
// or of a free object key, so that any plain string content is acceptable,
// and how many characters it may still add.
func (g *Grammar) plainBudget(t []frame) (int, bool) {
	f := &t[len(t)-1]
	if f.node == rootNode || f.esc != escNone || f.u8 != 0 {
		return 0, false
	}
	n := &g.nodes[f.node]
	switch {
	case n.kind == kindString && n.maxLen < 0:
		return math.MaxInt, true
	case n.kind == kindString:
		return int(n.maxLen - f.count), true
	case n.kind == kindObject && f.phase == objKey:
		return math.MaxInt, true
	}
	return 0, false
}

func (m *Matcher) ensureScratch() {
	if len(m.scratch) < m.v.maxLen+2 {
		m.scratch = make([]state, m.v.maxLen+2)
	}
}

// walk sets the bits of the tokens below trie node n whose bytes the state
// scratch[depth] accepts, skipping every subtree whose prefix it rejects.
func (m *Matcher) walk(t *trie, n int32, depth int, mask []uint64) {
	cur, next := &m.scratch[depth], &m.scratch[depth+1]
	kids := t.nodes[n].kidLo
	end := t.nodes[n].kidHi
	for c := kids; c < end; c++ {
		cn := &t.nodes[c]
		if !m.g.advance(cur, cn.b, next, &m.snap) {
			continue
		}
		for _, id := range t.ids[cn.idLo:cn.idHi] {
			mask[id>>6] |= 1 << (id & 63)
		}
		if cn.kidHi > cn.kidLo {
			m.walk(t, c, depth+1, mask)
		}
	}
}

// Accept advances the output by token id. It fails, leaving the matcher
// unchanged, if the token is not allowed.
func (m *Matcher) Accept(id int) error {
	if m.ended {
		return ErrEnded
	}
	if id < 0 || id >= m.v.size {
		return fmt.Errorf("grammar: token %d is outside the vocabulary (%d ids)", id, m.v.size)
	}
	for _, e := range m.v.eos {
		if e == id {
			if !m.Done() {
				return fmt.Errorf("grammar: end-of-sequence token %d before the value is complete", id)
			}
			m.ended = true
			return nil
		}
	}
	if m.v.banned[id] {
		return fmt.Errorf("grammar: token %d may not appear in the output", id)
	}
	if err := m.AcceptBytes(m.v.tokens[id]); err != nil {
		return fmt.Errorf("grammar: token %d (%q): %w", id, m.v.tokens[id], err)
	}
	return nil
}

// AcceptBytes advances the output by raw bytes (for forced text). It fails,
// leaving the matcher unchanged, if they cannot continue a valid value.
func (m *Matcher) AcceptBytes(b []byte) error {
	if m.ended {
		return ErrEnded
	}
	if len(m.scratch) < 2 {
		m.scratch = make([]state, 2)
	}
	cur := &m.st
	for i, c := range b {
		next := &m.scratch[i&1]
		if !m.g.advance(cur, c, next, &m.snap) {
			return fmt.Errorf("byte %d (%q) cannot continue the output", i, c)
		}
		cur = next
	}
	if cur != &m.st {
		m.st.copyFrom(cur)
	}
	return nil
}

// Vocab is the vocabulary the matcher masks.
func (m *Matcher) Vocab() *Vocab { return m.v }
