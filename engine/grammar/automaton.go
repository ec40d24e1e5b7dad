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

func stepString(f *frame, n *node, b byte) int {
	if b == '"' && f.esc == escNone && f.u8 == 0 {
		if f.count >= n.minLen {
			return resPop
		}
		return resReject
	}
	return stringByte(f, b, n.maxLen)
}

// stringByte feeds a byte of string content (not the closing quote) to the
// lexer in f, counting characters in f.count up to maxLen (-1: no limit).
func stringByte(f *frame, b byte, maxLen int32) int {
	if f.u8 != 0 {
		return continuation(f, b)
	}
	switch f.esc {
	case escNone:
	case escSlash:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.esc = escNone
		case 'u':
			f.esc = escU1
		default:
			return resReject
		}
		return resStay
	case escU1, escU2, escU2D, escU3, escU4:
		if !isHex(b) {
			return resReject
		}
		switch f.esc {
		case escU1:
			f.esc = escU2
			if b == 'd' || b == 'D' {
				f.esc = escU2D
			}
		case escU2D:
			if b > '7' {
				return resReject // D800..DFFF: surrogates
			}
			f.esc = escU3
		case escU2:
			f.esc = escU3
		case escU3:
			f.esc = escU4
		default:
			f.esc = escNone
		}
		return resStay
	default:
		return resReject
	}
	// A new character.
	if b < 0x20 || b == '"' || (maxLen >= 0 && f.count >= maxLen) {
		return resReject
	}
	if b == '\\' {
		f.esc = escSlash
		f.count++
		return resStay
	}
	return startChar(f, b)
}

// continuation feeds a UTF-8 continuation byte the lexer in f expects.
func continuation(f *frame, b byte) int {
	lo, hi := byte(0x80), byte(0xbf)
	switch f.u8 >> 2 {
	case u8E0:
		lo = 0xa0
	case u8ED:
		hi = 0x9f
	case u8F0:
		lo = 0x90
	case u8F4:
		hi = 0x8f
	}
	if b < lo || b > hi {
		return resReject
	}
	f.u8 = (f.u8 & 3) - 1 // later continuation bytes are of class u8Any
	return resStay
}

// startChar feeds the first byte of a character (ASCII or a UTF-8 lead
// byte) and counts the character.
func startChar(f *frame, b byte) int {
	switch {
	case b < 0x80:
	case b >= 0xc2 && b <= 0xdf:
		f.u8 = 1
	case b == 0xe0:
		f.u8 = 2 | u8E0<<2
	case b == 0xed:
		f.u8 = 2 | u8ED<<2
	case b >= 0xe1 && b <= 0xef:
		f.u8 = 2
	case b == 0xf0:
		f.u8 = 3 | u8F0<<2
	case b >= 0xf1 && b <= 0xf3:
		f.u8 = 3
	case b == 0xf4:
		f.u8 = 3 | u8F4<<2
	default:
		return resReject
	}
	f.count++
	return resStay
}

// rawByte feeds a byte of a raw string value: UTF-8 text without '<' (it
// would open markup around the value) and without control characters
// other than tab, newline and carriage return.
func rawByte(f *frame, n *node, b byte) int {
	if f.u8 != 0 {
		return continuation(f, b)
	}
	if b == '<' || b < 0x20 && b != '\t' && b != '\n' && b != '\r' || (n.maxLen >= 0 && f.count >= n.maxLen) {
		return resReject
	}
	return startChar(f, b)
}

// rawFirst is the set of bytes a raw string value can start with.
func rawFirst() byteSet {
	var s byteSet
	s.add('\t')
	s.add('\n')
	s.add('\r')
	s.addRange(0x20, 0x7f)
	s[0] &^= 1 << '<'
	s.addRange(0xc2, 0xf4)
	return s
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func stepNumber(f *frame, n *node, b byte) int {
	if !n.bounded {
		return stepDigits(f, n, b)
	}
	was := *f
	res := stepDigits(f, n, b)
	switch {
	case res == resPopFeed && !n.inBounds(f.val):
		return resReject
	case res == resStay && b >= '0' && b <= '9':
		// The value gained a digit (or is 0 after "-").
		if b != '0' || was.phase != numSign {
			mag := abs(was.val)*10 + int64(b-'0')
			if was.phase == numSign || was.val < 0 {
				mag = -mag
			}
			f.val = mag
		}
		if !n.reachable(f) {
			*f = was
			return resReject
		}
	}
	return res
}

// inBounds reports whether a complete integer lies within the bounds.
func (n *node) inBounds(v int64) bool { return v >= n.lowest && v <= n.highest }

// reachable reports whether the integer in f, after its digits so far,
// can still end within the bounds (maxIntDigits digits at most).
func (n *node) reachable(f *frame) bool {
	switch f.phase {
	case numZero:
		return n.inBounds(0)
	case numSign:
		return n.lowest <= 0 && n.highest >= max(n.lowest, -maxIntValue)
	}
	// Digits may follow: the magnitude lies in [m*10^k, (m+1)*10^k-1].
	m := abs(f.val)
	for k, p := int32(0), int64(1); f.count+k <= maxIntDigits; k, p = k+1, p*10 {
		lo, hi := m*p, (m+1)*p-1
		if f.val < 0 {
			lo, hi = -hi, -lo
		}
		if lo <= n.highest && hi >= n.lowest {
			return true
		}
	}
	return false
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// stepDigits lexes a number.
func stepDigits(f *frame, n *node, b byte) int {
	digit := b >= '0' && b <= '9'
	frac := n.kind == kindNumber
	switch f.phase {
	case numSign:
		if b == '0' {
			f.phase = numZero
			return resStay
		}
		if digit {
			f.phase, f.count = numInt, 1
			return resStay
		}
		return resReject
	case numDot:
		if digit {
			f.phase, f.count = numFrac, 1
			return resStay
		}
		return resReject
	case numE:
		if b == '+' || b == '-' {
			f.phase = numESign
			return resStay
		}
		if digit {
			f.phase, f.count = numExp, 1
			return resStay
		}
		return resReject
	case numESign:
		if digit {
			f.phase, f.count = numExp, 1
			return resStay
		}
		return resReject
	case numInt:
		if digit && f.count < maxIntDigits {
			f.count++
			return resStay
		}
	case numFrac:
		if digit && f.count < maxFracDigits {
			f.count++
			return resStay
		}
	case numExp:
		if digit && f.count < maxExpDigits {
			f.count++
			return resStay
		}
		return resPopFeed
	}
	// numZero, numInt, numFrac: a fraction or exponent may follow.
	if frac && b == '.' && f.phase != numFrac {
		f.phase = numDot
		return resStay
	}
	if frac && (b == 'e' || b == 'E') {
		f.phase = numE
		return resStay
	}
	return resPopFeed
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
