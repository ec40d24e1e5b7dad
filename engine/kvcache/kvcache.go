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
	// BF16 stores every value in bfloat16 instead of float32: half the
	// memory, each value rounded as it is stored (see rows).
	BF16 bool
}

// Layer is one layer's cache. Its KV rows hold KVLora+Rope values per
// token: the normalized latent followed by the roped shared key, so a query
// [q_absorbed | q_rope] scores every key with one dot product. Its Index
// rows hold IndexDim values per token on indexer layers. Readers get rows
// as float32 whatever the storage (KV, Index, CopyKV).
type Layer struct {
	kv, index rows
	n         int
	limit     int // rows the layer may reach
}

func newLayer(g Geometry, limit int) Layer {
	return Layer{
		kv:    rows{width: g.KVLora + g.Rope, bf16: g.BF16},
		index: rows{width: g.IndexDim, bf16: g.BF16},
		limit: limit,
	}
}

// Len is the number of tokens stored.
func (l *Layer) Len() int { return l.n }

// Append stores one token's state: kv is [latent | rope]; index may be nil
// for layers without indexer keys.
func (l *Layer) Append(kv, index []float32) {
	l.kv.add(kv, l.limit)
	if index != nil {
		l.index.add(index, l.limit)
	}
	l.n++
}

// KV returns the KV rows of tokens [lo, hi) as float32: the stored rows
// themselves (do not modify), or, from bfloat16, converted into buf, which
// must hold (hi-lo) rows.
func (l *Layer) KV(lo, hi int, buf []float32) []float32 { return l.kv.view(lo, hi, buf) }

// CopyKV writes the KV rows of tokens [lo, hi) into dst as float32.
func (l *Layer) CopyKV(dst []float32, lo, hi int) { l.kv.copyTo(dst, lo, hi) }

// Index returns the indexer keys of tokens [lo, hi) as KV returns rows.
func (l *Layer) Index(lo, hi int, buf []float32) []float32 { return l.index.view(lo, hi, buf) }

// KVBF16 returns the stored KV rows of tokens [0, hi) when the layer keeps
// them in bfloat16 (nil otherwise): for copying them elsewhere as they are.
func (l *Layer) KVBF16(hi int) []uint16 {
	if !l.kv.bf16 {
		return nil
	}
	return l.kv.b16[:hi*l.kv.width]
}

// BF16 reports whether the layer stores bfloat16.
func (l *Layer) BF16() bool { return l.kv.bf16 }

func (l *Layer) trim(n int) {
	if n >= l.n {
		return
	}
	l.kv.trim(n)
	l.index.trim(n)
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
	s := &Sequence{geo: geo, limit: limit, layers: make([]Layer, geo.Layers), mtp: newLayer(geo, limit)}
	for i := range s.layers {
		s.layers[i] = newLayer(geo, limit)
	}
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
		n += l.kv.bytes() + l.index.bytes()
	}
	return n + s.mtp.kv.bytes()
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
	return g.ValueBytes() * n
}

// ValueBytes is the bytes of one stored value: 2 in bfloat16, else 4.
func (g Geometry) ValueBytes() int64 {
	if g.BF16 {
		return 2
	}
	return 4
}

// ContextError reports a sequence that would exceed its context length.
type ContextError struct{ Have, Add, Limit int }

func (e *ContextError) Error() string {
	return fmt.Sprintf("context length exceeded: %d cached + %d new tokens > limit %d", e.Have, e.Add, e.Limit)
}
