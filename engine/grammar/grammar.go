package grammar

import (
	"errors"
	"fmt"
	"slices"
)

// Limits of the automaton. They keep generation finite and state small.
const (
	maxIndent     = 20  // spaces or tabs after a newline between tokens
	maxStack      = 128 // frames in one stack (nesting depth of a value)
	anyDepth      = 32  // nesting depth of free-form (json_object) values
	maxIntDigits  = 16  // digits before the decimal point
	maxFracDigits = 16  // digits after the decimal point
	maxExpDigits  = 3   // digits of an exponent
	maxThreads    = 64  // alternative parses followed at once (anyOf)
)

type nodeKind uint8

const (
	kindObject nodeKind = iota
	kindArray
	kindString
	kindNumber
	kindInteger
	kindLiteral
	kindUnion
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) union(o byteSet) { s[0] |= o[0]; s[1] |= o[1]; s[2] |= o[2]; s[3] |= o[3] }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

// prop is a declared object property.
type prop struct {
	name     string
	node     int32
	required bool
}

// node is one compiled schema: a kind of JSON value and its constraints.
type node struct {
	kind     nodeKind
	maxDepth int32   // a frame for this node is pushed only onto a shallower stack
	first    byteSet // bytes a value of this node can start with

	// object
	props      []prop  // declared properties, in output order
	additional int32   // node of additional properties' values; -1: none allowed
	freeKeys   bool    // no declared properties: keys are free strings
	nextReq    []int32 // nextReq[i]: first required property at index >= i, or len(props)
	keyTrie    int32   // trie of the declared keys (escaped name and closing quote)

	// array
	prefix   []int32 // prefixItems
	items    int32   // node of the items after prefix; -1: none
	minItems int32
	maxItems int32 // -1: unbounded

	// string
	minLen, maxLen int32 // in characters; maxLen -1: unbounded
	raw            bool  // raw text: no quotes and no escapes (see CompileArguments)

	// number, integer
	noMinus bool
	// integer: minimum and maximum, inclusive (bounded: enforced)
	bounded         bool
	lowest, highest int64

	// literal (enum, const, true/false/null)
	lit int32 // trie of the values' JSON texts

	// union (anyOf, oneOf, type lists)
	alts []int32
}

// litNode is a node of a literal or key trie.
type litNode struct {
	edges []litEdge // sorted by byte
	term  int32     // a value ends here: literal tries 0, key tries the property index; -1: none
	desc  []int32   // key tries: sorted property indices ending at or below this node
}

type litEdge struct {
	b    byte
	next int32
}

// Grammar is a compiled response format. It is immutable and safe for
// concurrent use by any number of Matchers.
type Grammar struct {
	nodes     []node
	lits      []litNode
	root      int32
	keyString int32 // unbounded string: free object keys
	// raw: the output is one raw string value (see CompileArguments): no
	// whitespace around it, and it ends wherever the value may end.
	raw bool
}

// builder adds nodes to a grammar under construction.
type builder struct {
	g   *Grammar
	any int32 // node of any JSON value, -1 until needed
}

func newBuilder() *builder {
	b := &builder{g: &Grammar{}, any: -1}
	b.g.keyString = b.add(node{kind: kindString, maxLen: -1})
	return b
}

func (b *builder) add(n node) int32 {
	if n.maxDepth == 0 {
		n.maxDepth = maxStack
	}
	b.g.nodes = append(b.g.nodes, n)
	return int32(len(b.g.nodes) - 1)
}

// newTrie returns the root of an empty trie.
func (b *builder) newTrie() int32 {
	b.g.lits = append(b.g.lits, litNode{term: -1})
	return int32(len(b.g.lits) - 1)
}

// insert adds text to the trie at root, ending in term.
func (b *builder) insert(root int32, text []byte, term int32) {
	g := b.g
	n := root
	for _, c := range text {
		i, ok := slices.BinarySearchFunc(g.lits[n].edges, c, func(e litEdge, c byte) int { return int(e.b) - int(c) })
		if ok {
			n = g.lits[n].edges[i].next
			continue
		}
		next := b.newTrie()
		g.lits[n].edges = slices.Insert(g.lits[n].edges, i, litEdge{c, next})
		n = next
	}
	if g.lits[n].term < 0 {
		g.lits[n].term = term
	}
}

// literal returns a node matching exactly the given JSON texts.
func (b *builder) literal(texts ...[]byte) int32 {
	root := b.newTrie()
	for _, t := range texts {
		b.insert(root, t, 0)
	}
	return b.add(node{kind: kindLiteral, lit: root})
}

// anyValue returns the node of any JSON value (nesting bounded by anyDepth).
func (b *builder) anyValue() int32 {
	if b.any >= 0 {
		return b.any
	}
	u := b.add(node{kind: kindUnion})
	b.any = u
	obj := b.add(node{kind: kindObject, freeKeys: true, additional: u, maxDepth: anyDepth})
	arr := b.add(node{kind: kindArray, items: u, maxItems: -1, maxDepth: anyDepth})
	str := b.add(node{kind: kindString, maxLen: -1})
	num := b.add(node{kind: kindNumber})
	lit := b.literal([]byte("true"), []byte("false"), []byte("null"))
	b.g.nodes[u].alts = []int32{obj, arr, str, num, lit}
	return u
}

// JSONObject returns the grammar of response_format {"type": "json_object"}:
// any JSON object, its values any JSON value.
func JSONObject() *Grammar {
	b := newBuilder()
	b.g.root = b.add(node{kind: kindObject, freeKeys: true, additional: b.anyValue(), maxDepth: anyDepth})
	if err := b.finish(); err != nil {
		// The fixed json_object grammar always finishes; an error here is a
		// bug in this package.
		panic("grammar: json_object grammar: " + err.Error())
	}
	return b.g
}

// finish checks the grammar, drops what can never complete and computes the
// tables the automaton uses.
func (b *builder) finish() error {
	g := b.g
	if err := g.checkLeftRecursion(); err != nil {
		return err
	}
	prod := g.productive()
	if !prod[g.root] {
		return errors.New("the schema admits no finite value")
	}
	g.prune(prod)
	for i := range g.nodes {
		n := &g.nodes[i]
		if n.kind != kindObject {
			continue
		}
		n.freeKeys = len(n.props) == 0
		n.nextReq = make([]int32, len(n.props)+1)
		n.nextReq[len(n.props)] = int32(len(n.props))
		for j := len(n.props) - 1; j >= 0; j-- {
			n.nextReq[j] = n.nextReq[j+1]
			if n.props[j].required {
				n.nextReq[j] = int32(j)
			}
		}
		if !n.freeKeys {
			n.keyTrie = b.newTrie()
			for j, p := range n.props {
				key := appendJSONString(nil, p.name)[1:] // without the opening quote
				b.insert(n.keyTrie, key, int32(j))
			}
			g.fillDesc(n.keyTrie)
		}
	}
	done := make([]bool, len(g.nodes))
	for i := range g.nodes {
		g.firstSet(int32(i), done)
	}
	return nil
}

// checkLeftRecursion refuses unions that contain themselves without a byte
// in between (anyOf: [{"$ref": "#"}]): they would never start a value.
func (g *Grammar) checkLeftRecursion() error {
	state := make([]uint8, len(g.nodes)) // 0 new, 1 on path, 2 done
	var visit func(i int32) error
	visit = func(i int32) error {
		switch state[i] {
		case 1:
			return errors.New("anyOf/oneOf/$ref alternatives refer to themselves without nesting")
		case 2:
			return nil
		}
		state[i] = 1
		for _, a := range g.nodes[i].alts {
			if err := visit(a); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for i := range g.nodes {
		if err := visit(int32(i)); err != nil {
			return err
		}
	}
	return nil
}

// productive reports for each node whether it has a finite value.
func (g *Grammar) productive() []bool {
	prod := make([]bool, len(g.nodes))
	for changed := true; changed; {
		changed = false
		for i := range g.nodes {
			if prod[i] {
				continue
			}
			n := &g.nodes[i]
			ok := true
			switch n.kind {
			case kindObject:
				for _, p := range n.props {
					if p.required && !prod[p.node] {
						ok = false
					}
				}
			case kindArray:
				for k := int32(0); k < n.minItems && ok; k++ {
					switch {
					case int(k) < len(n.prefix):
						ok = prod[n.prefix[k]]
					case n.items >= 0:
						ok = prod[n.items]
					default:
						ok = false
					}
				}
			case kindUnion:
				ok = false
				for _, a := range n.alts {
					ok = ok || prod[a]
				}
			}
			if ok {
				prod[i] = true
				changed = true
			}
		}
	}
	return prod
}

// prune removes the choices that lead to values with no finite completion,
// so that every state the automaton reaches can still be completed.
func (g *Grammar) prune(prod []bool) {
	for i := range g.nodes {
		n := &g.nodes[i]
		switch n.kind {
		case kindObject:
			n.props = slices.DeleteFunc(n.props, func(p prop) bool { return !prod[p.node] })
			if n.additional >= 0 && !prod[n.additional] {
				n.additional = -1
			}
		case kindArray:
			for k, p := range n.prefix {
				if !prod[p] {
					n.prefix = n.prefix[:k]
					n.items = -1
					if n.maxItems < 0 || n.maxItems > int32(k) {
						n.maxItems = int32(k)
					}
					break
				}
			}
			if n.items >= 0 && !prod[n.items] {
				n.items = -1
			}
			if n.items < 0 && (n.maxItems < 0 || n.maxItems > int32(len(n.prefix))) {
				n.maxItems = int32(len(n.prefix))
			}
		case kindUnion:
			n.alts = slices.DeleteFunc(n.alts, func(a int32) bool { return !prod[a] })
		}
	}
}

// fillDesc records under each key-trie node the properties ending below it.
func (g *Grammar) fillDesc(n int32) []int32 {
	var d []int32
	if g.lits[n].term >= 0 {
		d = append(d, g.lits[n].term)
	}
	for _, e := range g.lits[n].edges {
		d = append(d, g.fillDesc(e.next)...)
	}
	slices.Sort(d)
	g.lits[n].desc = d
	return d
}

// firstSet computes the bytes a value of node i can start with.
func (g *Grammar) firstSet(i int32, done []bool) byteSet {
	n := &g.nodes[i]
	if done[i] {
		return n.first
	}
	var s byteSet
	switch n.kind {
	case kindObject:
		s.add('{')
	case kindArray:
		s.add('[')
	case kindString:
		if n.raw {
			s = rawFirst()
		} else {
			s.add('"')
		}
	case kindNumber, kindInteger:
		s.addRange('0', '9')
		if !n.noMinus {
			s.add('-')
		}
	case kindLiteral:
		for _, e := range g.lits[n.lit].edges {
			s.add(e.b)
		}
	case kindUnion:
		for _, a := range n.alts {
			s.union(g.firstSet(a, done))
		}
	}
	n = &g.nodes[i]
	n.first = s
	done[i] = true
	return s
}

// String describes the grammar's size, for logs.
func (g *Grammar) String() string {
	return fmt.Sprintf("grammar(%d nodes, %d trie nodes)", len(g.nodes), len(g.lits))
}
