package generate

import (
	"math"
	"time"
)

// poolRows adds a prompt chunk's final-normed hidden states to the
// embedding's sum, in prompt order; after the last chunk it sets
// Result.Embedding to their mean, L2-normalised, and ends the generation.
// The sum is kept in float64 and taken row by row in prompt order, so the
// vector is the same however the prompt was chunked or batched.
func (d *Decoder) poolRows(hidden [][]float32, last bool) {
	for _, h := range hidden {
		for i, v := range h {
			d.pool[i] += float64(v)
		}
	}
	if !last {
		return
	}
	d.res.Embedding = meanNormalized(d.pool, len(d.prompt))
	d.res.PrefillExpertsTouched = d.touched.Len()
	d.res.PrefillExpertsByLayer = d.touched.PerLayer(d.m.Config().NumRoutedExperts)
	d.first = time.Now()
	d.res.PrefillTime = d.first.Sub(d.started)
	d.res.FinishReason = FinishStop
	d.done = true
}

// meanNormalized is sum/n scaled to unit L2 norm (the L2 normalisation
// makes the division by n moot, but a zero vector stays zero).
func meanNormalized(sum []float64, n int) []float32 {
	var sq float64
	for _, v := range sum {
		m := v / float64(n)
		sq += m * m
	}
	norm := math.Sqrt(sq)
	out := make([]float32, len(sum))
	for i, v := range sum {
		m := v / float64(n)
		if norm > 0 {
			m /= norm
		}
		out[i] = float32(m)
	}
	return out
}
