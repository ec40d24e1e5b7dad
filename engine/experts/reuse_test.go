package experts_test

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestAdjacentTokensShare measures, on glm52-mini's reference routes (HF
// transformers, every position of three prompts), how many distinct
// experts w adjacent tokens need per layer (the union an MTP verify or a
// batch reads once) against w x 8 and against independent routing. The
// trained model's neighbours share: the union stays well under the
// independent figure. The decode trace testdata/mini1.trace says the same
// of tokens generated one after the other.
func TestAdjacentTokensShare(t *testing.T) {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	const E, k = 64, 8
	for _, w := range []int{2, 3, 4} {
		var sum float64
		var n int
		for _, c := range refs.Cases {
			for _, r := range c.Routes {
				for p := 0; p+w <= len(r.IDs); p++ {
					u := map[int]bool{}
					for _, row := range r.IDs[p : p+w] {
						for _, e := range row {
							u[e] = true
						}
					}
					sum += float64(len(u))
					n++
				}
			}
		}
		got := sum / float64(n) / k
		indep := E * (1 - math.Pow(1-float64(k)/E, float64(w))) / k
		dec := decodeUnion(t, "mini1.trace", w) / k
		t.Logf("%d adjacent tokens read %.2f x one token's experts in prefill, %.2f in decode (independent routing: %.2f, no sharing: %d)", w, got, dec, indep, w)
		if got >= indep || dec >= indep {
			t.Errorf("%d tokens: unions %.2f and %.2f are not below independent routing's %.2f", w, got, dec, indep)
		}
	}
}

// decodeUnion is the mean union of w consecutive decode steps' experts
// per layer in a recorded trace.
func decodeUnion(t *testing.T, name string, w int) float64 {
	tr := loadTrace(t, name)
	by := map[int][][]int{}
	for _, s := range tr.Steps {
		by[s.Layer] = append(by[s.Layer], s.IDs)
	}
	var sum float64
	n := 0
	for _, steps := range by {
		for p := 0; p+w <= len(steps); p++ {
			u := map[int]bool{}
			for _, ids := range steps[p : p+w] {
				for _, e := range ids {
					u[e] = true
				}
			}
			sum += float64(len(u))
			n++
		}
	}
	return sum / float64(n)
}

// TestOrderReadsSharedFirst: with an Order hint, misses are read in its
// order (here one at a time, through a bank of one slot).
func TestOrderReadsSharedFirst(t *testing.T) {
	_, s := openStreamed(t, fixtures.Path(t, "glm52-tiny"), func(int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 1, Workers: 1}
	}, nil)
	ctx := context.Background()
	for _, tc := range []struct{ order, ids, want []int }{
		{nil, []int{2, 5, 9, 11}, []int{2, 5, 9, 11}},
		{[]int{9, 5}, []int{2, 5, 9, 11}, []int{9, 5, 2, 11}},
		{[]int{11, 2, 9, 5}, []int{2, 5, 9, 11}, []int{11, 2, 9, 5}},
	} {
		if tc.order != nil {
			s.Order(1, tc.order)
		}
		l, err := s.Acquire(ctx, 1, tc.ids)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for {
			i, _, err := l.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tc.ids[i])
			l.Done(i)
		}
		l.Release()
		if !slices.Equal(got, tc.want) {
			t.Errorf("order %v: experts arrived %v, want %v", tc.order, got, tc.want)
		}
	}
}
