package experts_test

import (
	"context"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// TestAscendingConsumerCompletes: a lease whose consumer applies its
// experts strictly in ascending id order (a layer-major forward's way,
// engine/model's moeAscending) holding any expert that arrives ahead of
// its turn until then, completes with far more misses than working slots
// and a few cache slots: the streamed tier reads misses in id order into
// the working bank, so the lowest expert not yet applied is always
// cached, being read, or next to get a slot.
func TestAscendingConsumerCompletes(t *testing.T) {
	dir := fixtures.Path(t, "glm52-mini")
	c, cfg := testmodel.Open(t, dir)
	layers := cfg.SparseLayers()
	want := map[[2]int]string{}
	reader := loader.ExpertLoader{C: c, Config: cfg}
	for _, l := range layers {
		for e := range cfg.NumRoutedExperts {
			x, err := reader.LoadExpert(l, e)
			if err != nil {
				t.Fatal(err)
			}
			want[[2]int{l, e}] = digest(x)
		}
	}
	probe, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := probe.SlotSetBytes()
	probe.Close()
	for _, working := range []int{1, 2, 5} {
		s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: 3 * set, WorkingSlots: working, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		experts.SetPoison(s, true)
		rng := newRand(uint64(working))
		for round := range 6 {
			l := layers[round%len(layers)]
			ids := rng.sample(cfg.NumRoutedExperts, cfg.NumRoutedExperts/2+rng.intn(cfg.NumRoutedExperts/2))
			// Most leases ask in ascending order, some in another.
			if round%3 == 2 {
				for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
					ids[i], ids[j] = ids[j], ids[i]
				}
			}
			lease, err := s.Acquire(context.Background(), l, ids)
			if err != nil {
				t.Fatal(err)
			}
			order := make([]int, len(ids)) // indices of ids by ascending id
			for i := range order {
				order[i] = i
			}
			for i := range order {
				for j := i + 1; j < len(order); j++ {
					if ids[order[j]] < ids[order[i]] {
						order[i], order[j] = order[j], order[i]
					}
				}
			}
			got := make([]*experts.Expert, len(ids))
			for _, i := range order {
				for got[i] == nil {
					k, x, err := lease.Next(context.Background())
					if err != nil {
						t.Fatalf("working slots %d, layer %d, %d experts: waiting for expert %d: %v", working, l, len(ids), ids[i], err)
					}
					got[k] = x
				}
				if d := digest(got[i]); d != want[[2]int{l, ids[i]}] {
					t.Fatalf("layer %d expert %d: delivered bytes differ from the resident copy", l, ids[i])
				}
				lease.Done(i)
			}
			lease.Release()
		}
		if st := s.Stats(); st.Total.Misses <= int64(4*working) {
			t.Errorf("working slots %d: only %d misses", working, st.Total.Misses)
		}
		if err := experts.CheckInvariants(s, true); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMissesReadInRankOrder: a cold lease's misses reach the read pool in
// rank order (ascending id without an Order hint), those admitted to LRU
// slots among them: with one read worker the lowest id is delivered first,
// so an ascending consumer starts computing after one read, not after the
// admitted ones.
func TestMissesReadInRankOrder(t *testing.T) {
	dir := fixtures.Path(t, "glm52-mini")
	c, cfg := testmodel.Open(t, dir)
	layers := cfg.SparseLayers()
	probe, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := probe.SlotSetBytes()
	probe.Close()
	s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: 4 * set, WorkingSlots: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []int{3, 9, 17, 21, 30, 33, 40, 41, 50, 63}
	lease, err := s.Acquire(context.Background(), layers[0], ids)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var order []int
	for range ids {
		i, _, err := lease.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ids[i])
		lease.Done(i)
	}
	if order[0] != ids[0] {
		t.Errorf("experts delivered in the order %v: the lowest id is not first", order)
	}
	if hits := experts.LeaseHits(lease); slices.Contains(hits, true) {
		t.Errorf("a cold cache hit: %v", hits)
	}
}
