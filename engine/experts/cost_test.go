package experts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
)

// readSizes is what reading each expert of layers costs alone: one lease
// per expert on a source with no cache.
func readSizes(t *testing.T, s *experts.Streamed, layers []int, E int) map[[2]int]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[[2]int]int64{}
	for _, l := range layers {
		for e := range E {
			lease, err := s.Acquire(ctx, l, []int{e})
			if err != nil {
				t.Fatal(err)
			}
			drainLease(t, lease)
			c := lease.Cost()
			if c.Experts != 1 || c.Bytes <= 0 {
				t.Fatalf("layer %d expert %d alone: cost %+v, want one expert read", l, e, c)
			}
			out[[2]int{l, e}] = c.Bytes
		}
	}
	return out
}

// drainLease takes every expert of a lease and releases it.
func drainLease(t *testing.T, l experts.Lease) {
	t.Helper()
	defer l.Release()
	for {
		i, _, err := l.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Done(i)
	}
}

// waitAhead waits until layer's read-ahead of id has landed.
func waitAhead(t *testing.T, s *experts.Streamed, layer, id int) {
	t.Helper()
	for i := 0; !experts.AheadDone(s, layer, id); i++ {
		if i == 20000 {
			t.Fatalf("the read-ahead of layer %d expert %d never landed", layer, id)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLeaseCostIsItsOwn: each lease reports what was read for it — not a
// read-ahead of another layer landing while it is out, nor another
// lease's reads in flight at the same time; a read-ahead counts for the
// lease that claims it (whether it landed before the claim or after),
// and one nobody claims for none.
func TestLeaseCostIsItsOwn(t *testing.T) {
	_, s := openStreamed(t, fixtures.Path(t, "glm52-mini"), func(int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 24, Workers: 1, ReadChunk: 4096, Prefetch: true}
	}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
	size := readSizes(t, s, []int{1, 2, 3}, 64)
	sum := func(layer int, ids ...int) experts.Cost {
		c := experts.Cost{Experts: len(ids)}
		for _, e := range ids {
			c.Bytes += size[[2]int{layer, e}]
		}
		return c
	}
	ctx := context.Background()
	before := s.Stats().Total

	// A is out (its reads in flight or landed, nothing consumed) while a
	// read-ahead of layer 2 lands and while B reads.
	a, err := s.Acquire(ctx, 1, []int{3, 9, 20})
	if err != nil {
		t.Fatal(err)
	}
	s.Prefetch(ctx, 2, []int{5, 6})
	waitAhead(t, s, 2, 5)
	waitAhead(t, s, 2, 6)
	b, err := s.Acquire(ctx, 2, []int{5, 7}) // claims 5's read-ahead; 6's was a wrong guess
	if err != nil {
		t.Fatal(err)
	}
	drainLease(t, b)
	drainLease(t, a)
	if got, want := a.Cost(), sum(1, 3, 9, 20); got != want {
		t.Errorf("lease A: cost %+v, want %+v (its own three experts)", got, want)
	}
	if got, want := b.Cost(), sum(2, 5, 7); got != want {
		t.Errorf("lease B: cost %+v, want %+v (the read-ahead it claimed and its own read)", got, want)
	}

	// A read-ahead claimed while its reads are still in flight: the one
	// read worker is held on the read-ahead's first read until the claim.
	gate := make(chan struct{})
	experts.SetFault(s, func(n int64) error {
		if n == 1 {
			<-gate
		}
		return nil
	})
	s.Prefetch(ctx, 3, []int{11})
	c, err := s.Acquire(ctx, 3, []int{11, 12})
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	drainLease(t, c)
	experts.SetFault(s, nil)
	if got, want := c.Cost(), sum(3, 11, 12); got != want {
		t.Errorf("lease C: cost %+v, want %+v (a read-ahead claimed mid-read and its own read)", got, want)
	}

	experts.QuiescePrefetch(s)
	st := s.Stats().Total
	if hits, cancelled := st.PrefetchHits-before.PrefetchHits, st.PrefetchCancelled-before.PrefetchCancelled; hits != 2 || cancelled != 1 {
		t.Errorf("%d read-aheads claimed and %d cancelled, want 2 and 1", hits, cancelled)
	}
	// The tier read the wrong guess too; no lease paid for it.
	leases := a.Cost().Bytes + b.Cost().Bytes + c.Cost().Bytes
	if read := st.BytesRead - before.BytesRead; read != leases+size[[2]int{2, 6}] {
		t.Errorf("the tier read %d bytes, the leases %d and the wrong guess %d", read, leases, size[[2]int{2, 6}])
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Error(err)
	}
}

// TestForwardCostsWithTwoRunners: two runners generate at once on one
// streamed source with no cache, so that each forward reads every expert
// it routes to. Each forward's recorded cost is exactly those experts'
// reads, whatever the other runner's forwards and the read-aheads both
// start read meanwhile; with no read-ahead the runners' records add up to
// what the tier read; and the tokens are the plain path's.
func TestForwardCostsWithTwoRunners(t *testing.T) {
	const model0 = "glm52-mini"
	ref := residentRef(t, model0)
	for _, prefetch := range []bool{false, true} {
		name := "no read-ahead"
		if prefetch {
			name = "read-ahead"
		}
		t.Run(name, func(t *testing.T) {
			d, s := openStreamed(t, fixtures.Path(t, model0), func(int64) experts.StreamOptions {
				return experts.StreamOptions{WorkingSlots: 40, Workers: 4, ReadChunk: 8192, Prefetch: prefetch}
			}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
			m := d.Model
			cfg := d.Config
			layers := model.ExpertLayers(cfg, m.HasMTP())
			size := readSizes(t, s, layers, cfg.NumRoutedExperts)
			before := s.Stats().Total

			runners := []*model.Runner{m.NewRunner(), m.NewRunner()}
			spec := []bool{false, true}
			got := make([][]int, len(runners))
			errs := make([]error, len(runners))
			forwards := make([]int, len(runners))
			var wg sync.WaitGroup
			for k, r := range runners {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := ref.prompts[k%len(ref.prompts)]
					got[k], forwards[k], errs[k] = generateChecked(r, p, spec[k], layers, size)
				}()
			}
			wg.Wait()
			for k := range runners {
				if errs[k] != nil {
					t.Fatalf("runner %d: %v", k, errs[k])
				}
				want := ref.plain[k%len(ref.prompts)]
				if spec[k] {
					want = ref.spec[k%len(ref.prompts)]
				}
				if !slices.Equal(got[k], want) {
					t.Errorf("runner %d: tokens %v, want %v", k, got[k], want)
				}
			}
			st := s.Stats().Total
			var recorded int64
			for _, r := range runners {
				recorded += r.TotalCost().Bytes
			}
			read := st.BytesRead - before.BytesRead
			switch {
			case !prefetch && recorded != read:
				t.Errorf("the runners recorded %d bytes, the tier read %d", recorded, read)
			case prefetch && (recorded > read || st.Prefetched == before.Prefetched):
				t.Errorf("the runners recorded %d bytes, the tier read %d with %d read-aheads", recorded, read, st.Prefetched-before.Prefetched)
			}
			t.Logf("%d and %d forwards; the runners recorded %d bytes, the tier read %d (%d read ahead, %d claimed)",
				forwards[0], forwards[1], recorded, read, st.Prefetched-before.Prefetched, st.PrefetchHits-before.PrefetchHits)
		})
	}
}

// generateChecked generates from prompt in r, as generate.Generate does,
// checking after every forward that its recorded cost is the reads of
// the experts it acquired (size, by layer and expert).
func generateChecked(r *model.Runner, prompt []int, spec bool, layers []int, size map[[2]int]int64) ([]int, int, error) {
	ctx := context.Background()
	m := r.Model()
	E := m.Config().NumRoutedExperts
	d, err := generate.NewDecoder(r, m.NewSequence(0), prompt, generate.Params{MaxTokens: genTokens, Speculative: spec}, nil)
	if err != nil {
		return nil, 0, err
	}
	defer d.Finish(ctx)
	n := 0
	for !d.Done() {
		req, err := d.Next(ctx, spec)
		if err != nil {
			return nil, n, err
		}
		outs, cost, err := generate.Forward(ctx, r, []model.Request{req})
		if err != nil {
			return nil, n, err
		}
		n++
		var want experts.Cost
		for row, e := range cost.Experts.All(E) {
			want.Experts++
			want.Bytes += size[[2]int{layers[row], e}]
		}
		if got := (experts.Cost{Experts: cost.ExpertsRead, Bytes: cost.ExpertBytes}); got != want || got != r.LastCost() {
			return nil, n, fmt.Errorf("forward %d: recorded %+v (runner %+v), its experts' reads are %+v", n, got, r.LastCost(), want)
		}
		if err := d.Consume(ctx, outs[0], cost); err != nil {
			return nil, n, err
		}
	}
	return d.Result().Tokens, n, nil
}
