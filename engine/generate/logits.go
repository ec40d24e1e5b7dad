package generate

import (
	"math"
	"math/bits"
	"slices"
)

// Constraint restricts which tokens a generation may produce (constrained
// decoding, for example a JSON schema). Before each sample the decoder
// calls Mask; every sampled token that is not a stop token goes to Accept.
// Stop tokens are allowed exactly when Done reports true; when Done and no
// other token is allowed, generation finishes with FinishStop.
type Constraint interface {
	// Mask sets bit t (allowed[t/64] & 1<<(t%64)) of every token t that
	// may come next. allowed is zeroed and covers the model's vocabulary.
	Mask(allowed []uint64)
	// Accept advances the constraint past token.
	Accept(token int) error
	// Done reports whether the constrained text is complete.
	Done() bool
}

// Token is one generated token.
type Token struct {
	ID int
	// Logprob and Top are set when the generation asked for logprobs.
	Logprob float64
	Top     []TokenLogprob
}

// TokenLogprob is one alternative with its log probability.
type TokenLogprob struct {
	ID      int
	Logprob float64
}

var negInf = float32(math.Inf(-1))

// logitProcessor is one generation's logit processing: its penalties'
// counts and its constraint's mask.
type logitProcessor struct {
	p      *Params
	counts map[int]int // occurrences of generated tokens (penalties)
	mask   []uint64    // one bit per vocabulary id (constraint)
}

func newLogitProcessor(p *Params, vocab int) logitProcessor {
	lp := logitProcessor{p: p}
	if p.FrequencyPenalty != 0 || p.PresencePenalty != 0 {
		lp.counts = map[int]int{}
	}
	if p.Constraint != nil {
		lp.mask = make([]uint64, (vocab+63)/64)
	}
	return lp
}

// generated records a token for the penalties.
func (lp *logitProcessor) generated(tok int) {
	if lp.counts != nil {
		lp.counts[tok]++
	}
}

// pick chooses the next token from logits (which it may modify): logit bias
// and penalties first, logprobs from that distribution, then the
// constraint's mask, then the sampler. stop reports that the constraint is
// complete and allows nothing but a stop.
func (lp *logitProcessor) pick(s *Sampler, logits []float32) (tok int, tl *Token, stop bool) {
	p := lp.p
	if !p.processed() {
		return s.Sample(logits), nil, false
	}
	for t, b := range p.LogitBias {
		logits[t] += float32(b)
	}
	for t, n := range lp.counts {
		logits[t] -= float32(float64(n)*p.FrequencyPenalty + p.PresencePenalty)
	}
	var lse float64
	if p.Logprobs {
		lse = logSumExp(logits)
	}
	var top []TokenLogprob
	if p.Logprobs && p.TopLogprobs > 0 {
		top = topLogprobs(logits, p.TopLogprobs, lse)
	}
	if p.Constraint != nil && !lp.applyMask(logits) {
		return -1, nil, true
	}
	tok = s.Sample(logits)
	if !p.Logprobs {
		return tok, nil, false
	}
	// The sampled token is allowed, so the mask left its logit alone.
	return tok, &Token{ID: tok, Logprob: float64(logits[tok]) - lse, Top: top}, false
}

// applyMask sets the logits of tokens the constraint forbids to -inf. Stop
// tokens are allowed only once the constraint is done. It reports false
// when no token at all is allowed (generation then stops).
func (lp *logitProcessor) applyMask(logits []float32) bool {
	c, stops := lp.p.Constraint, lp.p.StopTokens
	mask := lp.mask
	clear(mask)
	c.Mask(mask)
	done := c.Done()
	for _, t := range stops {
		if t >= 0 && t < len(logits) {
			if done {
				mask[t/64] |= 1 << (t % 64)
			} else {
				mask[t/64] &^= 1 << (t % 64)
			}
		}
	}
	anyAllowed := false
	for w, word := range mask {
		if word != 0 {
			anyAllowed = true
		}
		for b := 0; b < 64; b++ {
			t := w*64 + b
			if t >= len(logits) {
				break
			}
			if word&(1<<b) == 0 {
				logits[t] = negInf
			}
		}
	}
	if !anyAllowed {
		return false
	}
	// When only stop tokens remain the constraint is complete.
	if done {
		others := false
		for w, word := range mask {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				if !slices.Contains(stops, w*64+b) {
					others = true
					break
				}
			}
			if others {
				break
			}
		}
		if !others {
			return false
		}
	}
	// Every allowed logit could be -inf or NaN; the sampler then falls
	// back to the argmax, which must be an allowed token.
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			if v := logits[w*64+b]; v == v && v != negInf {
				return true
			}
		}
	}
	return false
}

func logSumExp(logits []float32) float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		if v == v && float64(v) > m {
			m = float64(v)
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	var sum float64
	for _, v := range logits {
		if v == v {
			sum += math.Exp(float64(v) - m)
		}
	}
	return m + math.Log(sum)
}

// topLogprobs returns the n most likely tokens (ties by lower id).
func topLogprobs(logits []float32, n int, lse float64) []TokenLogprob {
	best := make([]int, 0, n+1)
	better := func(a, b int) bool { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b) }
	for t, v := range logits {
		if v != v {
			continue
		}
		if len(best) == n && !better(t, best[n-1]) {
			continue
		}
		i := len(best)
		for i > 0 && better(t, best[i-1]) {
			i--
		}
		best = slices.Insert(best, i, t)
		if len(best) > n {
			best = best[:n]
		}
	}
	out := make([]TokenLogprob, len(best))
	for i, t := range best {
		out[i] = TokenLogprob{ID: t, Logprob: float64(logits[t]) - lse}
	}
	return out
}
