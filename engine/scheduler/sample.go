package scheduler

import (
	"math"
	"math/bits"
	"slices"
)

var negInf = float32(math.Inf(-1))

// pick chooses a's next token from logits (which it may modify): logit bias
// and penalties first, logprobs from that distribution, then the
// constraint's mask, then the request's sampler. stop reports that the
// constraint is complete and allows nothing but a stop.
func (s *Scheduler) pick(a *active, logits []float32) (tok int, tl *Token, stop bool) {
	r := &a.req
	if !r.processed() {
		return a.sampler.Sample(logits), nil, false
	}
	for t, b := range r.LogitBias {
		logits[t] += float32(b)
	}
	if a.counts != nil {
		for t, n := range a.counts {
			logits[t] -= float32(float64(n)*r.FrequencyPenalty + r.PresencePenalty)
		}
	}
	var lse float64
	if r.Logprobs {
		lse = logSumExp(logits)
	}
	var top []TokenLogprob
	if r.Logprobs && r.TopLogprobs > 0 {
		top = topLogprobs(logits, r.TopLogprobs, lse)
	}
	if c := r.Constraint; c != nil {
		if !s.applyMask(a, logits) {
			return -1, nil, true
		}
	}
	tok = a.sampler.Sample(logits)
	if !r.Logprobs {
		return tok, nil, false
	}
	// The sampled token is allowed, so the mask left its logit alone.
	lp := float64(logits[tok]) - lse
	return tok, &Token{ID: tok, Logprob: lp, Top: top}, false
}

// applyMask sets the logits of tokens the constraint forbids to -inf. Stop
// tokens are allowed only once the constraint is done. It reports false
// when no token at all is allowed (the request then stops).
func (s *Scheduler) applyMask(a *active, logits []float32) bool {
	c := a.req.Constraint
	mask := s.mask
	clear(mask)
	c.Mask(mask)
	done := c.Done()
	for _, t := range a.req.StopTokens {
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
				if !slices.Contains(a.req.StopTokens, w*64+b) {
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
