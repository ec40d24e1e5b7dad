package experts_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// refLRU is the policy written the simple way: one access at a time, the
// lease's hits touched first in ascending id order, then its misses
// inserted in ascending id order; an insertion into a full cache evicts the
// least recently used entry that this lease did not hit, and is skipped
// when there is none.
type refLRU struct {
	cap   int
	clock int
	stamp map[int]int
}

func (r *refLRU) lease(ids []int) []bool {
	hits := make([]bool, len(ids))
	hit := map[int]bool{}
	for i, id := range ids {
		if _, ok := r.stamp[id]; ok {
			r.clock++
			r.stamp[id] = r.clock
			hits[i], hit[id] = true, true
		}
	}
	for _, id := range ids {
		if hit[id] {
			continue
		}
		if len(r.stamp) >= r.cap {
			victim, best := -1, 0
			for e, st := range r.stamp {
				if !hit[e] && (victim < 0 || st < best) {
					victim, best = e, st
				}
			}
			if victim < 0 {
				continue
			}
			delete(r.stamp, victim)
		}
		r.clock++
		r.stamp[id] = r.clock
	}
	return hits
}

func openContainer(t *testing.T, model string) (*container.Container, *config.Config) {
	t.Helper()
	return testmodel.Open(t, fixtures.Path(t, model))
}

func slotSet(t *testing.T, c *container.Container, cfg *config.Config, layers []int) int64 {
	t.Helper()
	probe, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{WorkingSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	return probe.SlotSetBytes()
}

// drain takes every expert of a lease, marking each Done.
func drain(t *testing.T, l experts.Lease) {
	t.Helper()
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

// TestPolicyTrace replays skewed random routing through the streamed tier
// and the reference LRU and compares every hit and the cache contents.
func TestPolicyTrace(t *testing.T) {
	c, cfg := openContainer(t, "glm52-tiny")
	layers := cfg.SparseLayers()
	set := slotSet(t, c, cfg, layers)
	for _, slots := range []int{0, 1, 2, 3, 5} {
		s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: int64(slots) * set, WorkingSlots: 2, Workers: 3})
		if err != nil {
			t.Fatal(err)
		}
		refs := map[int]*refLRU{}
		for _, l := range layers {
			refs[l] = &refLRU{cap: slots, stamp: map[int]int{}}
		}
		rng := newRand(uint64(slots) + 11)
		E := cfg.NumRoutedExperts
		hot := []int{1, 4, 9}
		for step := range 300 {
			l := layers[rng.intn(len(layers))]
			set := map[int]bool{}
			for range 1 + rng.intn(6) {
				if rng.intn(2) == 0 {
					set[hot[rng.intn(len(hot))]] = true
				} else {
					set[rng.intn(E)] = true
				}
			}
			ids := slices.Sorted(maps.Keys(set))
			lease, err := s.Acquire(context.Background(), l, ids)
			if err != nil {
				t.Fatal(err)
			}
			got := experts.LeaseHits(lease)
			drain(t, lease)
			lease.Release()
			want := refs[l].lease(ids)
			if !slices.Equal(got, want) {
				t.Fatalf("%d slots, step %d, layer %d ids %v: hits %v, reference %v", slots, step, l, ids, got, want)
			}
			if got, want := experts.LRUContents(s, l), slices.Sorted(maps.Keys(refs[l].stamp)); !slices.Equal(got, want) {
				t.Fatalf("%d slots, step %d, layer %d: cache holds %v, reference %v", slots, step, l, got, want)
			}
		}
		if err := experts.CheckInvariants(s, true); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkingBankWaitsForDone: with more misses than working slots, Next
// waits until the consumer marks a delivered expert Done (the model does so
// from its compute workers while the lease is read), then reuses that slot.
func TestWorkingBankWaitsForDone(t *testing.T) {
	c, cfg := openContainer(t, "glm52-tiny")
	layers := cfg.SparseLayers()
	s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{WorkingSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	experts.SetPoison(s, true)
	ids := []int{0, 1, 2}
	want := map[int]string{}
	for _, id := range ids {
		x, err := loader.ExpertLoader{C: c, Config: cfg}.LoadExpert(layers[0], id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = digest(x)
	}
	lease, err := s.Acquire(context.Background(), layers[0], ids)
	if err != nil {
		t.Fatal(err)
	}
	i, x, err := lease.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		i   int
		d   string
		err error
	}
	next := make(chan result)
	go func() {
		j, y, err := lease.Next(context.Background())
		if err != nil {
			next <- result{err: err}
			return
		}
		next <- result{i: j, d: digest(y)}
	}()
	// The first expert stays intact while the second waits for its slot.
	if digest(x) != want[ids[i]] {
		t.Fatalf("expert %d changed while leased", ids[i])
	}
	lease.Done(i)
	r := <-next
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.d != want[ids[r.i]] {
		t.Fatalf("expert %d: wrong bytes", ids[r.i])
	}
	lease.Release() // the third was never taken
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lease.Next(context.Background()); err == nil {
		t.Error("Next after Release succeeded")
	}
	lease, err = s.Acquire(context.Background(), layers[0], ids)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, lease)
	lease.Release()
}

func TestAcquireErrors(t *testing.T) {
	c, cfg := openContainer(t, "glm52-tiny")
	layers := cfg.SparseLayers()
	s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layer int
		ids   []int
	}{
		{0, []int{1}},                            // dense layer
		{layers[0], []int{cfg.NumRoutedExperts}}, // out of range
		{layers[0], []int{-1}},
		{layers[0], []int{3, 3}}, // twice
	} {
		if _, err := s.Acquire(context.Background(), tc.layer, tc.ids); err == nil {
			t.Errorf("Acquire(%d, %v) succeeded", tc.layer, tc.ids)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), layers[0], []int{1}); err == nil {
		t.Error("Acquire after Close succeeded")
	}
	if _, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: -1}); err == nil {
		t.Error("negative cache accepted")
	}
}
