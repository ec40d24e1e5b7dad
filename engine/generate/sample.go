package generate

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/spoolhq/spool/engine/config"
)

// The ranges of the sampling parameters: the one set that the CLI and
// every API (OpenAI, Anthropic, Ollama-style bodies) check, through
// Sampling.Validate.
const (
	// MaxTemperature is the highest temperature accepted (OpenAI's
	// range, 0..2; Anthropic's documented 0..1 lies within it).
	MaxTemperature = 2.0
)

// Sampling selects the next token from logits. The sampler chain is the
// one ollama and llama.cpp use: top-k, temperature, softmax, top-p, min-p,
// then a draw.
type Sampling struct {
	// Temperature 0 means greedy (argmax, first index on ties).
	Temperature float64
	// TopK keeps the K most likely tokens (0 = all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP, the crossing token included (0 or 1 = all).
	TopP float64
	// MinP keeps the tokens whose probability is at least MinP times the
	// most likely token's (0 = all).
	MinP float64
	// Seed makes sampling reproducible.
	Seed uint64
}

// SamplingFor turns a model's generation_config defaults into sampling
// parameters: greedy unless the model asks for sampling, temperature 1
// when it asks for sampling without naming one.
func SamplingFor(g config.Generation) Sampling {
	if !g.DoSample {
		return Sampling{}
	}
	s := Sampling{Temperature: 1, TopP: g.TopP, TopK: g.TopK, MinP: g.MinP}
	if g.Temperature > 0 {
		s.Temperature = g.Temperature
	}
	return s
}

// ParamError is a sampling parameter out of its range; Param is its API
// name (temperature, top_p, top_k, min_p).
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Msg }

// Validate rejects out-of-range parameters with a *ParamError naming them.
func (s Sampling) Validate() error {
	bad := func(param, format string, args ...any) error {
		return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || s.Temperature > MaxTemperature:
		return bad("temperature", "temperature %g is out of range (0..%g)", s.Temperature, MaxTemperature)
	case s.TopK < 0:
		return bad("top_k", "top_k %d must not be negative", s.TopK)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return bad("top_p", "top_p %g is out of range (0..1)", s.TopP)
	case s.MinP < 0 || s.MinP > 1 || math.IsNaN(s.MinP):
		return bad("min_p", "min_p %g is out of range (0..1)", s.MinP)
	}
	return nil
}

// Sampler draws tokens according to Sampling with its own random stream.
//
// It never sorts the vocabulary: the candidates go into a heap (linear
// time) and are taken out most likely first only as far as the chain
// needs them (top-k, the top-p and min-p cuts, the draw's walk), which for
// a trained model's peaked distributions is a few dozen of 154,880.
type Sampler struct {
	s     Sampling
	rng   *rand.Rand
	heap  candidateHeap
	order []int     // candidates taken out of the heap, most likely first
	probs []float64 // their unnormalised probabilities
}

// NewSampler returns a sampler seeded from s.Seed.
func NewSampler(s Sampling) *Sampler {
	return &Sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9E3779B97F4A7C15))}
}

// Greedy reports whether the sampler always takes the argmax.
func (p *Sampler) Greedy() bool { return p.s.Temperature == 0 }

// Argmax returns the index of the largest logit (the first on ties; NaN never wins).
func Argmax(logits []float32) int {
	best := -1
	for i, v := range logits {
		if v != v { // NaN
			continue
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

// Sample picks the next token. The candidates are ranked by logit, the
// lower index first on ties; the token drawn for a seed is the one a full
// sort of the vocabulary would give.
func (p *Sampler) Sample(logits []float32) int {
	if p.Greedy() {
		return Argmax(logits)
	}
	top, ok := maxLogit(logits)
	if !ok {
		return Argmax(logits)
	}
	inv := 1 / p.s.Temperature
	weight := func(i int) float64 { return math.Exp((float64(logits[i]) - top) * inv) }

	// Candidates (no NaN, no -Inf) into the heap. Without top-k the
	// softmax's sum is over all of them, summed here.
	p.heap.logits = logits
	p.heap.ids = p.heap.ids[:0]
	var sum float64
	for i, v := range logits {
		if v == v && !math.IsInf(float64(v), -1) {
			p.heap.ids = append(p.heap.ids, int32(i))
			if p.s.TopK == 0 {
				sum += weight(i)
			}
		}
	}
	p.heap.init()
	limit := len(p.heap.ids)
	if p.s.TopK > 0 && p.s.TopK < limit {
		limit = p.s.TopK
	}
	p.order, p.probs = p.order[:0], p.probs[:0]
	// more takes the next most likely candidate out, within top-k.
	more := func() bool {
		if len(p.order) >= limit || len(p.heap.ids) == 0 {
			return false
		}
		i := p.heap.pop()
		p.order = append(p.order, i)
		p.probs = append(p.probs, weight(i))
		return true
	}
	if p.s.TopK > 0 {
		// Top-k: the softmax is over the K kept, summed most likely first.
		for more() {
			sum += p.probs[len(p.probs)-1]
		}
	}

	// The top-p and min-p cuts: both keep a prefix of the ranking.
	keep := -1 // unknown: every candidate within top-k
	topP := p.s.TopP > 0 && p.s.TopP < 1
	if topP || p.s.MinP > 0 {
		var cum float64
		for j := 0; ; j++ {
			if j == len(p.order) && !more() {
				keep = j
				break
			}
			if p.s.MinP > 0 && p.probs[j] < p.s.MinP { // probs[0] is 1
				keep = j
				break
			}
			if topP {
				if cum += p.probs[j] / sum; cum >= p.s.TopP {
					keep = j + 1
					break
				}
			}
		}
	}
	kept := sum
	if keep >= 0 {
		kept = 0
		for _, w := range p.probs[:keep] {
			kept += w
		}
	}

	// The draw walks the ranking from the most likely.
	u := p.rng.Float64() * kept
	for j := 0; ; j++ {
		if keep >= 0 && j == keep || j == len(p.order) && !more() {
			return p.order[j-1]
		}
		if u -= p.probs[j]; u < 0 {
			return p.order[j]
		}
	}
}

// maxLogit is the largest logit that is a candidate (not NaN, not -Inf).
func maxLogit(logits []float32) (float64, bool) {
	top, ok := math.Inf(-1), false
	for _, v := range logits {
		if v == v && !math.IsInf(float64(v), -1) && (!ok || float64(v) > top) {
			top, ok = float64(v), true
		}
	}
	return top, ok
}

// candidateHeap is a max-heap of token ids by logit, the lower id first on
// ties: a strict order, so the ids come out exactly as a sort ranks them.
type candidateHeap struct {
	logits []float32
	ids    []int32
}

func (h *candidateHeap) before(a, b int32) bool {
	la, lb := h.logits[a], h.logits[b]
	return la > lb || la == lb && a < b
}

func (h *candidateHeap) init() {
	for i := len(h.ids)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candidateHeap) pop() int {
	top := h.ids[0]
	last := len(h.ids) - 1
	h.ids[0] = h.ids[last]
	h.ids = h.ids[:last]
	h.down(0)
	return int(top)
}

func (h *candidateHeap) down(i int) {
	ids := h.ids
	n := len(ids)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && h.before(ids[r], ids[l]) {
			best = r
		}
		if !h.before(ids[best], ids[i]) {
			return
		}
		ids[i], ids[best] = ids[best], ids[i]
		i = best
	}
}
