package grammar

import "slices"

// frame is one level of a parse stack: a value being written.
type frame struct {
	node  int32 // grammar node; rootNode for the bottom frame
	aux   int32 // object: key trie node, then the chosen property; literal: trie node
	count int32 // object: next property; array: items; string: characters; number: digits
	phase uint8
	ws    uint8 // length of the current whitespace run
	esc   uint8 // string lexer: escape state (escDead: free key impossible)
	u8    uint8 // string lexer: UTF-8 continuation bytes still due, and their class
	val   int64 // bounded integer: the value so far (negative after '-' and a digit)
}

const rootNode = -1

// Phases.
const (
	rootBefore uint8 = iota
	rootAfter
)

const (
	objOpen uint8 = iota // after '{'
	objKey               // inside a declared key
	objColon
	objValue
	objAfter // after a member's value
	objComma
)

const (
	arrOpen uint8 = iota
	arrAfter
	arrComma
)

const (
	numSign uint8 = iota // after '-'
	numZero              // a leading 0
	numInt
	numDot
	numFrac
	numE
	numESign
	numExp
)

// Object aux values once the key is complete.
const (
	keyAdditional = -2 // an additional property
	keyDead       = -1 // no declared key matches
)

// String lexer escape states.
const (
	escNone  uint8 = iota
	escSlash       // after '\'
	escU1          // \u, first hex digit due
	escU2          // second hex digit due
	escU2D         // second hex digit due after 'D' (no surrogates)
	escU3
	escU4
	escDead = 0xff
)

// UTF-8 classes of the first continuation byte (bits 2..4 of u8).
const (
	u8Any = iota // 80..BF
	u8E0         // A0..BF (no overlong)
	u8ED         // 80..9F (no surrogates)
	u8F0         // 90..BF (no overlong)
	u8F4         // 80..8F (<= U+10FFFF)
)

// Results of feeding one byte to a frame.
const (
	resReject  = iota
	resStay    // consumed
	resPop     // consumed, and the value is complete
	resPopFeed // the value was complete; the byte belongs to the parent
	resPush    // start a child value with this byte
)

// state is a set of parse stacks ("threads"), one per live alternative,
// stored back to back.
type state struct {
	frames []frame
	ends   []int32 // end of each thread in frames
}

func (s *state) reset() {
	s.frames = s.frames[:0]
	s.ends = s.ends[:0]
}

func (s *state) copyFrom(o *state) {
	s.frames = append(s.frames[:0], o.frames...)
	s.ends = append(s.ends[:0], o.ends...)
}

func (s *state) thread(i int) []frame {
	start := int32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.frames[start:s.ends[i]]
}

// initial returns the state before any output.
func (g *Grammar) initial() state {
	if g.raw {
		return g.initialRaw()
	}
	return state{
		frames: []frame{{node: rootNode, aux: g.root}},
		ends:   []int32{1},
	}
}

// initialRaw starts a raw value: it has no opening byte, so each
// alternative is a thread from the start, its root already past the value.
func (g *Grammar) initialRaw() state {
	var s state
	var add func(n int32)
	add = func(n int32) {
		nd := &g.nodes[n]
		if nd.kind == kindUnion {
			for _, a := range nd.alts {
				add(a)
			}
			return
		}
		f := frame{node: n}
		if nd.kind == kindLiteral {
			f.aux = nd.lit
		}
		s.frames = append(s.frames, frame{node: rootNode, phase: rootAfter}, f)
		s.ends = append(s.ends, int32(len(s.frames)))
	}
	add(g.root)
	if len(s.ends) > 1 {
		s.dedupe()
	}
	return s
}

// advance feeds byte b to every thread of src and writes the survivors to
// dst. It reports whether any survived. snap is scratch space.
func (g *Grammar) advance(src *state, b byte, dst *state, snap *[]frame) bool {
	dst.reset()
	start := int32(0)
	for _, end := range src.ends {
		s := len(dst.frames)
		dst.frames = append(dst.frames, src.frames[start:end]...)
		g.feed(dst, s, b, snap)
		start = end
	}
	if len(dst.ends) > 1 {
		dst.dedupe()
	}
	return len(dst.ends) > 0
}

// dedupe drops threads equal to an earlier one, and any beyond maxThreads.
func (s *state) dedupe() {
	out := 0 // threads kept
	w := int32(0)
	start := int32(0)
	for _, end := range s.ends {
		t := s.frames[start:end]
		start = end
		dup := false
		ks := int32(0)
		for k := 0; k < out && !dup; k++ {
			dup = slices.Equal(s.frames[ks:s.ends[k]], t)
			ks = s.ends[k]
		}
		if dup || out == maxThreads {
			continue
		}
		copy(s.frames[w:], t)
		w += int32(len(t))
		s.ends[out] = w
		out++
	}
	s.frames = s.frames[:w]
	s.ends = s.ends[:out]
}

// feed feeds b to the thread at dst.frames[s:], the last one, and closes the
// threads that result (none if it is rejected, several if it forks).
func (g *Grammar) feed(dst *state, s int, b byte, snap *[]frame) {
	for {
		top := len(dst.frames) - 1
		res, child := g.step(&dst.frames[top], b)
		switch res {
		case resStay:
			dst.ends = append(dst.ends, int32(len(dst.frames)))
			return
		case resPop:
			dst.frames = dst.frames[:top]
			dst.ends = append(dst.ends, int32(len(dst.frames)))
			return
		case resPopFeed:
			dst.frames = dst.frames[:top]
		case resPush:
			g.start(dst, s, child, b, snap)
			return
		default:
			dst.frames = dst.frames[:s]
			return
		}
	}
}

// start begins a value of node n with byte b on the thread at dst.frames[s:].
func (g *Grammar) start(dst *state, s int, n int32, b byte, snap *[]frame) {
	nd := &g.nodes[n]
	if !nd.first.has(b) || len(dst.frames)-s >= int(nd.maxDepth) {
		dst.frames = dst.frames[:s]
		return
	}
	if nd.kind == kindUnion {
		var only int32 = -1
		matches := 0
		for _, a := range nd.alts {
			if g.nodes[a].first.has(b) {
				only = a
				matches++
			}
		}
		if matches == 1 {
			g.start(dst, s, only, b, snap)
			return
		}
		mark := len(*snap)
		*snap = append(*snap, dst.frames[s:]...)
		dst.frames = dst.frames[:s]
		for _, a := range nd.alts {
			if g.nodes[a].first.has(b) {
				t := len(dst.frames)
				dst.frames = append(dst.frames, (*snap)[mark:]...)
				g.start(dst, t, a, b, snap)
			}
		}
		*snap = (*snap)[:mark]
		return
	}
	f := frame{node: n}
	switch nd.kind {
	case kindNumber, kindInteger:
		switch {
		case b == '-':
			f.phase = numSign
		case b == '0':
			f.phase = numZero
		default:
			f.phase = numInt
			f.count = 1
			f.val = int64(b - '0')
		}
		if nd.bounded && !nd.reachable(&f) {
			dst.frames = dst.frames[:s]
			return
		}
	case kindLiteral:
		f.aux = g.litChild(nd.lit, b)
	}
	// Objects, arrays and strings start in phase 0 on their opening byte,
	// which the first set has checked.
	dst.frames = append(dst.frames, f)
	dst.ends = append(dst.ends, int32(len(dst.frames)))
}

// litChild returns the child of trie node n on byte b, or -1.
func (g *Grammar) litChild(n int32, b byte) int32 {
	edges := g.lits[n].edges
	if len(edges) <= 8 {
		for _, e := range edges {
			if e.b == b {
				return e.next
			}
		}
		return -1
	}
	lo, hi := 0, len(edges)
	for lo < hi {
		m := (lo + hi) / 2
		if edges[m].b < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(edges) && edges[lo].b == b {
		return edges[lo].next
	}
	return -1
}

func isWS(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// Whitespace runs (frame.ws): none, a single space, or a newline followed
// by at most maxIndent spaces or tabs.
const (
	wsNone = iota
	wsSpace
	wsNewline // + the number of indent bytes
)

// space consumes whitespace byte b if the run may take it.
func space(f *frame, b byte) int {
	switch {
	case f.ws == wsNone && b == ' ':
		f.ws = wsSpace
	case f.ws == wsNone && b == '\n':
		f.ws = wsNewline
	case f.ws >= wsNewline && f.ws < wsNewline+maxIndent && (b == ' ' || b == '\t'):
		f.ws++
	default:
		return resReject
	}
	return resStay
}

// step feeds b to frame f.
func (g *Grammar) step(f *frame, b byte) (int, int32) {
	if f.node == rootNode {
		if g.raw {
			// Nothing surrounds a raw value.
			return resReject, 0
		}
		if isWS(b) {
			return space(f, b), 0
		}
		if f.phase == rootBefore {
			f.phase, f.ws = rootAfter, 0
			return resPush, f.aux
		}
		return resReject, 0
	}
	n := &g.nodes[f.node]
	switch n.kind {
	case kindObject:
		return g.stepObject(f, n, b)
	case kindArray:
		return stepArray(f, n, b)
	case kindString:
		if n.raw {
			return rawByte(f, n, b), 0
		}
		return stepString(f, n, b), 0
	case kindNumber, kindInteger:
		return stepNumber(f, n, b), 0
	case kindLiteral:
		if c := g.litChild(f.aux, b); c >= 0 {
			f.aux = c
			return resStay, 0
		}
		if g.lits[f.aux].term >= 0 {
			return resPopFeed, 0
		}
	}
	return resReject, 0
}

// declared bounds the properties that may come next: indices lo..hi
// (optional ones may be skipped up to the first required one).
func declared(n *node, next int32) (lo, hi int32) {
	hi = n.nextReq[next]
	if hi == int32(len(n.props)) {
		hi--
	}
	return next, hi
}

func additionalOK(n *node, next int32) bool {
	return n.additional >= 0 && n.nextReq[next] == int32(len(n.props))
}

func keyPossible(n *node, next int32) bool {
	return int(next) < len(n.props) || additionalOK(n, next)
}

func closable(n *node, next int32) bool { return n.nextReq[next] == int32(len(n.props)) }

func (g *Grammar) inRange(t int32, lo, hi int32) bool {
	d := g.lits[t].desc
	i, _ := slices.BinarySearch(d, lo)
	return i < len(d) && d[i] <= hi
}

func (g *Grammar) stepObject(f *frame, n *node, b byte) (int, int32) {
	switch f.phase {
	case objOpen, objComma:
		if isWS(b) {
			return space(f, b), 0
		}
		if b == '}' && f.phase == objOpen && closable(n, f.count) {
			return resPop, 0
		}
		if b != '"' || !keyPossible(n, f.count) {
			return resReject, 0
		}
		f.ws = 0
		if n.freeKeys {
			f.phase, f.aux = objColon, keyAdditional
			return resPush, g.keyString
		}
		f.phase, f.aux, f.u8 = objKey, n.keyTrie, 0
		f.esc = escDead
		if additionalOK(n, f.count) {
			f.esc = escNone
		}
		return resStay, 0
	case objKey:
		// The key is matched against the declared names (trie node in aux)
		// and, when additional properties may come, lexed as a free key
		// (esc, u8) that must not equal a declared name and has no escapes.
		lo, hi := declared(n, f.count)
		t := int32(keyDead)
		if f.aux >= 0 {
			t = g.litChild(f.aux, b)
		}
		if t >= 0 && g.lits[t].term >= 0 {
			// A declared name is complete (only its closing quote ends at a
			// terminal).
			if j := g.lits[t].term; int(lo) < len(n.props) && j >= lo && j <= hi {
				f.phase, f.aux, f.ws = objColon, j, 0
				return resStay, 0
			}
			return resReject, 0
		}
		if b == '"' && f.esc == escNone && f.u8 == 0 {
			f.phase, f.aux, f.ws = objColon, keyAdditional, 0
			return resStay, 0
		}
		if f.esc != escDead {
			next := f.count
			if b == '\\' || stringByte(f, b, -1) != resStay {
				f.esc = escDead
			}
			f.count = next
		}
		if t >= 0 && (int(lo) >= len(n.props) || !g.inRange(t, lo, hi)) {
			t = keyDead
		}
		if t < 0 && f.esc == escDead {
			return resReject, 0
		}
		f.aux = t
		return resStay, 0
	case objColon:
		if isWS(b) {
			return space(f, b), 0
		}
		if b == ':' {
			f.phase, f.ws = objValue, 0
			return resStay, 0
		}
	case objValue:
		if isWS(b) {
			return space(f, b), 0
		}
		child := n.additional
		if f.aux >= 0 {
			child = n.props[f.aux].node
			f.count = f.aux + 1
		} else {
			f.count = int32(len(n.props))
		}
		f.phase, f.ws = objAfter, 0
		return resPush, child
	case objAfter:
		switch {
		case isWS(b):
			return space(f, b), 0
		case b == ',' && keyPossible(n, f.count):
			f.phase, f.ws = objComma, 0
			return resStay, 0
		case b == '}' && closable(n, f.count):
			return resPop, 0
		}
	}
	return resReject, 0
}

func stepArray(f *frame, n *node, b byte) (int, int32) {
	if isWS(b) {
		return space(f, b), 0
	}
	avail := (n.maxItems < 0 || f.count < n.maxItems) && (int(f.count) < len(n.prefix) || n.items >= 0)
	switch {
	case b == ']' && f.phase != arrComma:
		if f.count >= n.minItems {
			return resPop, 0
		}
	case f.phase == arrAfter:
		if b == ',' && avail {
			f.phase, f.ws = arrComma, 0
			return resStay, 0
		}
	case avail:
		child := n.items
		if int(f.count) < len(n.prefix) {
			child = n.prefix[f.count]
		}
		f.count++
		f.phase, f.ws = arrAfter, 0
		return resPush, child
	}
	return resReject, 0
}

// canEnd reports whether a thread holds a complete value: the output may
// stop here.
func (g *Grammar) canEnd(t []frame) bool {
	for i := len(t) - 1; i >= 0; i-- {
		f := &t[i]
		if f.node == rootNode {
			return f.phase == rootAfter
		}
		n := &g.nodes[f.node]
		switch n.kind {
		case kindNumber, kindInteger:
			if f.phase != numZero && f.phase != numInt && f.phase != numFrac && f.phase != numExp {
				return false
			}
			if n.bounded && !n.inBounds(f.val) {
				return false
			}
		case kindLiteral:
			if g.lits[f.aux].term < 0 {
				return false
			}
		case kindString:
			if !n.raw || f.count < n.minLen || f.u8 != 0 {
				return false
			}
		default:
			return false
		}
	}
	return false
}
