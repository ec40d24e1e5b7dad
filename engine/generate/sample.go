package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampling selects the next token from logits.
type Sampling struct {
	// Temperature 0 means greedy (argmax, first index on ties).
	Temperature float64
	// TopK keeps the K most likely tokens (0 = all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP, the crossing token included (0 or 1 = all).
	TopP float64
	// Seed makes sampling reproducible.
	Seed uint64
}

// Validate rejects out-of-range parameters with a message naming them.
func (s Sampling) Validate() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || s.Temperature > 100:
		return fmt.Errorf("temperature %g is out of range (0..100)", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d must not be negative", s.TopK)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("top_p %g is out of range (0..1]", s.TopP)
	}
	return nil
}

// Sampler draws tokens according to Sampling with its own random stream.
type Sampler struct {
	s     Sampling
	rng   *rand.Rand
	probs []float64
	order []int
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

// Sample picks the next token.
func (p *Sampler) Sample(logits []float32) int {
	if p.Greedy() {
		return Argmax(logits)
	}
	n := len(logits)
	p.order = p.order[:0]
	for i, v := range logits {
		if v == v && !math.IsInf(float64(v), -1) {
			p.order = append(p.order, i)
		}
	}
	if len(p.order) == 0 {
		return Argmax(logits)
	}
	slices.SortFunc(p.order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return a - b
	})
	if p.s.TopK > 0 && p.s.TopK < len(p.order) {
		p.order = p.order[:p.s.TopK]
	}
	if cap(p.probs) < n {
		p.probs = make([]float64, n)
	}
	probs := p.probs[:len(p.order)]
	inv := 1 / p.s.Temperature
	top := float64(logits[p.order[0]])
	var sum float64
	for j, i := range p.order {
		probs[j] = math.Exp((float64(logits[i]) - top) * inv)
		sum += probs[j]
	}
	keep := len(p.order)
	if p.s.TopP > 0 && p.s.TopP < 1 {
		var cum float64
		for j := range probs {
			cum += probs[j] / sum
			if cum >= p.s.TopP {
				keep = j + 1
				break
			}
		}
	}
	var kept float64
	for j := 0; j < keep; j++ {
		kept += probs[j]
	}
	u := p.rng.Float64() * kept
	for j := 0; j < keep; j++ {
		u -= probs[j]
		if u < 0 {
			return p.order[j]
		}
	}
	return p.order[keep-1]
}
