package generate_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/generate"
)

// sortSampler is the sampler as it was before partial selection: it sorts
// every candidate, then applies top-k, the softmax, top-p and (added here
// with the same cut as the sampler's) min-p, and walks the sorted list. The
// partial-selection sampler must draw the same tokens.
type sortSampler struct {
	s   generate.Sampling
	rng *rand.Rand
}

func newSortSampler(s generate.Sampling) *sortSampler {
	return &sortSampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9E3779B97F4A7C15))}
}

func (p *sortSampler) Sample(logits []float32) int {
	if p.s.Temperature == 0 {
		return generate.Argmax(logits)
	}
	var order []int
	for i, v := range logits {
		if v == v && !math.IsInf(float64(v), -1) {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return generate.Argmax(logits)
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return a - b
	})
	if p.s.TopK > 0 && p.s.TopK < len(order) {
		order = order[:p.s.TopK]
	}
	probs := make([]float64, len(order))
	inv := 1 / p.s.Temperature
	top := float64(logits[order[0]])
	var sum float64
	for j, i := range order {
		probs[j] = math.Exp((float64(logits[i]) - top) * inv)
		sum += probs[j]
	}
	keep := len(order)
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
	if p.s.MinP > 0 {
		for j := range keep {
			if probs[j] < p.s.MinP {
				keep = j
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
			return order[j]
		}
	}
	return order[keep-1]
}

// logitShapes are vocabularies the comparison draws from: a trained
// model's peaked logits, flat ones, heavy ties, and NaN/-Inf holes.
func logitShapes(n int, rng *rand.Rand) map[string][]float32 {
	peaked, flat, ties, holes := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		peaked[i] = float32(rng.NormFloat64() * 3)
		flat[i] = float32(rng.Float64() * 0.01)
		ties[i] = float32(rng.IntN(4))
		holes[i] = float32(rng.NormFloat64() * 2)
		switch rng.IntN(10) {
		case 0:
			holes[i] = float32(math.NaN())
		case 1:
			holes[i] = float32(math.Inf(-1))
		}
	}
	for range 8 { // a few strong candidates, as a trained model has
		peaked[rng.IntN(n)] += 12
	}
	return map[string][]float32{"peaked": peaked, "flat": flat, "ties": ties, "holes": holes}
}

func TestPartialSelectionDrawsTheSortedTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	samplings := []generate.Sampling{
		{Temperature: 1},
		{Temperature: 0.6, TopP: 0.95},
		{Temperature: 1, TopK: 40},
		{Temperature: 0.8, TopK: 40, TopP: 0.9},
		{Temperature: 1.5, TopK: 1},
		{Temperature: 1, TopK: 1 << 20}, // more than the vocabulary
		{Temperature: 0.7, MinP: 0.05},
		{Temperature: 1, TopP: 0.9, MinP: 0.1},
		{Temperature: 2, TopK: 100, MinP: 0.2},
		{Temperature: 1, TopP: 0.5},
	}
	for _, n := range []int{1, 7, 1000, 154_880} {
		shapes := logitShapes(n, rng)
		for name, logits := range shapes {
			for _, s := range samplings {
				draws, seeds := 200, uint64(3)
				if n > 10_000 {
					draws, seeds = 3, 1
				}
				for seed := range seeds {
					s.Seed = seed
					got, want := generate.NewSampler(s), newSortSampler(s)
					for d := range draws {
						if g, w := got.Sample(logits), want.Sample(logits); g != w {
							t.Fatalf("n=%d %s %+v draw %d: sampled %d, the full sort %d", n, name, s, d, g, w)
						}
					}
				}
			}
		}
	}
}

func TestMinPKeepsTokensNearTheTop(t *testing.T) {
	// Probabilities 0.6, 0.3, 0.1: min_p 0.6 keeps what reaches 0.36.
	logits := []float32{float32(math.Log(0.6)), float32(math.Log(0.3)), float32(math.Log(0.1))}
	s := generate.NewSampler(generate.Sampling{Temperature: 1, MinP: 0.6, Seed: 5})
	for range 1000 {
		if got := s.Sample(logits); got != 0 {
			t.Fatalf("min_p 0.6 sampled %d, want only 0", got)
		}
	}
	// min_p 0.4 keeps 0 and 1 (0.3 >= 0.24), in their ratio.
	s = generate.NewSampler(generate.Sampling{Temperature: 1, MinP: 0.4, Seed: 5})
	counts := [3]int{}
	const n = 20000
	for range n {
		counts[s.Sample(logits)]++
	}
	if counts[2] != 0 || math.Abs(float64(counts[1])/n-1.0/3) > 0.02 {
		t.Fatalf("min_p 0.4 counts %v, want 2:1 between tokens 0 and 1 and none of 2", counts)
	}
}

func TestSamplingRanges(t *testing.T) {
	for _, tc := range []struct {
		s     generate.Sampling
		param string
	}{
		{generate.Sampling{Temperature: 2}, ""},
		{generate.Sampling{Temperature: 2.01}, "temperature"},
		{generate.Sampling{Temperature: math.NaN()}, "temperature"},
		{generate.Sampling{Temperature: -0.1}, "temperature"},
		{generate.Sampling{TopK: -1}, "top_k"},
		{generate.Sampling{TopP: 1.01}, "top_p"},
		{generate.Sampling{MinP: 1}, ""},
		{generate.Sampling{MinP: -0.5}, "min_p"},
		{generate.Sampling{MinP: math.NaN()}, "min_p"},
	} {
		err := tc.s.Validate()
		var pe *generate.ParamError
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("%+v: %v", tc.s, err)
		case tc.param != "" && (!errors.As(err, &pe) || pe.Param != tc.param):
			t.Errorf("%+v: error %v, want one naming %s", tc.s, err, tc.param)
		}
	}
}

func TestSamplingFor(t *testing.T) {
	for _, tc := range []struct {
		g    config.Generation
		want generate.Sampling
	}{
		{config.Generation{Temperature: 0.6, TopP: 0.95}, generate.Sampling{}},
		{config.Generation{DoSample: true}, generate.Sampling{Temperature: 1}},
		{config.Generation{DoSample: true, Temperature: 0.6, TopP: 0.95, TopK: 40, MinP: 0.05}, generate.Sampling{Temperature: 0.6, TopP: 0.95, TopK: 40, MinP: 0.05}},
	} {
		if got := generate.SamplingFor(tc.g); got != tc.want {
			t.Errorf("SamplingFor(%+v) = %+v, want %+v", tc.g, got, tc.want)
		}
	}
}

// BenchmarkSample draws from a GLM-5.2-sized vocabulary (154,880 ids) with
// peaked logits, by partial selection and by the full sort it replaced.
func BenchmarkSample(b *testing.B) {
	logits := logitShapes(154_880, rand.New(rand.NewPCG(1, 1)))["peaked"]
	for _, s := range []generate.Sampling{{Temperature: 0.6, TopP: 0.95}, {Temperature: 1, TopK: 40}, {Temperature: 1}} {
		b.Run(fmt.Sprintf("heap/%+v", s), func(b *testing.B) {
			p := generate.NewSampler(s)
			for b.Loop() {
				p.Sample(logits)
			}
		})
		b.Run(fmt.Sprintf("sort/%+v", s), func(b *testing.B) {
			p := newSortSampler(s)
			for b.Loop() {
				p.Sample(logits)
			}
		})
	}
}
