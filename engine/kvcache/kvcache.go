package kvcache

import "fmt"

// Geometry describes what one token stores.
type Geometry struct {
	Layers   int    // decoder layers (MTP not counted)
	KVLora   int    // latent width per token per layer
	Rope     int    // shared rope key width per token per layer
	IndexDim int    // indexer key width (0 when DSA is off)
	Indexer  []bool // Indexer[l]: layer l stores indexer keys
	MTP      bool   // the MTP layer has its own cache
}

// Layer is one layer's cache. KV holds one row of KVLora+Rope values per
// token: the normalized latent followed by the roped shared key, so a query
// [q_absorbed | q_rope] scores every key with one dot product. Index holds
// IndexDim values per token on indexer layers.
type Layer struct {
	KV    []float32
	Index []float32
	n     int
	limit int // rows the layer may reach
}

// Len is the number of tokens stored.
func (l *Layer) Len() int { return l.n }

// Append stores one token's state: kv is [latent | rope]; index may be nil
// for layers without indexer keys.
func (l *Layer) Append(kv, index []float32) {
	l.KV = appendBounded(l.KV, kv, l.limit)
	if index != nil {
		l.Index = appendBounded(l.Index, index, l.limit)
	}
	l.n++
}

// appendBounded appends one token's row, growing capacity geometrically but
// never beyond limit rows, so a full sequence holds exactly what the memory
// plan counted.
func appendBounded(dst, row []float32, limit int) []float32 {
	if len(dst)+len(row) > cap(dst) {
		rows := max(2*cap(dst)/max(len(row), 1), 64)
		if limit > 0 {
			rows = min(rows, limit)
		}
		grown := make([]float32, len(dst), max(rows*len(row), len(dst)+len(row)))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, row...)
}

func (l *Layer) trim(n, kv, rope, idx int) {
	if n >= l.n {
		return
	}
	l.KV = l.KV[:n*(kv+rope)]
	if l.Index != nil {
		l.Index = l.Index[:n*idx]
	}
	l.n = n
}

// Sequence is the cached state of one token sequence.
type Sequence struct {
	geo    Geometry
	limit  int
	tokens []int
	layers []Layer
	mtp    Layer
	// mtpFrom is the position of the MTP cache's first row: its row i is
	// the state of position mtpFrom+i (0 unless the MTP layer started over
	// past the start; see mtp.go).
	mtpFrom int
}

// New returns an empty sequence that refuses to grow past limit tokens.
func New(geo Geometry, limit int) *Sequence {
	s := &Sequence{geo: geo, limit: limit, layers: make([]Layer, geo.Layers)}
	for i := range s.layers {
		s.layers[i].limit = limit
	}
	s.mtp.limit = limit
	return s
}

// Geometry returns what the sequence stores per token.
func (s *Sequence) Geometry() Geometry { return s.geo }

// Limit is the context length the sequence may reach.
func (s *Sequence) Limit() int { return s.limit }

// Len is the number of tokens whose state is cached.
func (s *Sequence) Len() int { return len(s.tokens) }

// Tokens returns the cached tokens (do not modify).
func (s *Sequence) Tokens() []int { return s.tokens }

// Layer returns layer l's cache.
func (s *Sequence) Layer(l int) *Layer { return &s.layers[l] }

// Reserve records that tokens are about to be forwarded; the model then
// appends their state layer by layer. It fails when the context would
// overflow.
func (s *Sequence) Reserve(tokens []int) error {
	if len(s.tokens)+len(tokens) > s.limit {
		return &ContextError{Have: len(s.tokens), Add: len(tokens), Limit: s.limit}
	}
	s.tokens = append(s.tokens, tokens...)
	return nil
}

// Bytes is the memory the cached state occupies.
func (s *Sequence) Bytes() int64 {
	var n int64
	for i := range s.layers {
		l := &s.layers[i]
		n += int64(len(l.KV)+len(l.Index)) * 4
	}
	n += int64(len(s.mtp.KV)) * 4
	return n
}

// BytesPerToken is what one more token costs.
func (g Geometry) BytesPerToken() int64 {
	layers := g.Layers
	if g.MTP {
		layers++
	}
	n := int64(layers) * int64(g.KVLora+g.Rope)
	for _, idx := range g.Indexer {
		if idx {
			n += int64(g.IndexDim)
		}
	}
	return 4 * n
}

// ContextError reports a sequence that would exceed its context length.
type ContextError struct{ Have, Add, Limit int }

func (e *ContextError) Error() string {
	return fmt.Sprintf("context length exceeded: %d cached + %d new tokens > limit %d", e.Have, e.Add, e.Limit)
}
