package model

import (
	"sync/atomic"
	"time"
)

// StepTimes accumulates the wall time forwards spend in each step of the
// layer forward, for benchmarks that say where a prefill's time goes
// (spool bench prefill). It is safe for concurrent use; Model.SetStepTimes
// attaches it.
type StepTimes struct {
	d [numSteps]atomic.Int64 // nanoseconds
}

// step is one of the forward's steps that StepTimes accounts for.
type step int

const (
	stepEmbed    step = iota // embedding rows
	stepNorm                 // the layers' RMSNorms and residual adds
	stepProject              // attention's projections (q_a, kv_a, q_b, the indexer's)
	stepAttnHost             // attention's norms and RoPE of q and kv, cache appends
	stepIndexer              // the DSA indexer's scoring and top-k
	stepAttend               // attention over the cache and o_proj
	stepPrefetch             // expert prefetch hints (decode)
	stepMLP                  // the dense MLP, or the router, experts and shared expert
	stepHead                 // final norm and lm_head
	numSteps
)

var stepNames = [numSteps]string{"embed", "norm", "project", "attn_host", "indexer", "attend", "prefetch", "mlp", "head"}

// Seconds returns the time of each step so far, by name.
func (s *StepTimes) Seconds() map[string]float64 {
	out := make(map[string]float64, numSteps)
	for i := range s.d {
		out[stepNames[i]] = time.Duration(s.d[i].Load()).Seconds()
	}
	return out
}

// SetStepTimes makes the model's forwards add their steps' times to s
// (nil stops it).
func (m *Model) SetStepTimes(s *StepTimes) { m.steps.Store(s) }

// clock is a forward's view of its StepTimes: lap adds the time since the
// previous lap to a step. With no StepTimes it does nothing and reads no
// clock.
type clock struct {
	s    *StepTimes
	last time.Time
}

func (m *Model) clock() clock {
	s := m.steps.Load()
	if s == nil {
		return clock{}
	}
	return clock{s: s, last: time.Now()}
}

// lap charges the time since the previous lap (or the clock's start) to st.
func (c *clock) lap(st step) {
	if c == nil || c.s == nil {
		return
	}
	now := time.Now()
	c.s.d[st].Add(int64(now.Sub(c.last)))
	c.last = now
}
