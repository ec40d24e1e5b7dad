package experts_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
)

// TestLRUShareWaitsForLeases: SetLRUShare frees unleased slots at once;
// slots a lease holds keep their expert until the next forward's first
// Acquire; growing back maps empty slots that fill again; the experts
// handed out are the same bytes throughout.
func TestLRUShareWaitsForLeases(t *testing.T) {
	c, cfg := openContainer(t, "glm52-tiny")
	layers := cfg.SparseLayers()
	set := slotSet(t, c, cfg, layers)
	const planned = 4
	s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: planned * set, WorkingSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	experts.SetPoison(s, true)
	first, last := layers[0], layers[len(layers)-1]
	take := func(layer int, ids []int) map[int]string {
		l, err := s.Acquire(context.Background(), layer, ids)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]string{}
		for range ids {
			i, x, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got[ids[i]] = digest(x)
			l.Done(i)
		}
		l.Release()
		return got
	}
	want := take(last, []int{0, 1, 2, 3}) // fills the last layer's LRU
	if st := s.Stats(); st.LRUSlots != planned*len(layers) || st.Cached != planned {
		t.Fatalf("planned: %+v", st)
	}
	slabs := s.Stats().SlabBytes

	// A lease holds two of the last layer's cached experts.
	held, err := s.Acquire(context.Background(), last, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.SetLRUShare(0); err != nil || n != 0 {
		t.Fatalf("share 0: %d slots, %v", n, err)
	}
	st := s.Stats()
	if st.LRUSlots != 2 || st.Cached != 2 || !slices.Equal(experts.LRUContents(s, last), []int{0, 1}) {
		t.Fatalf("with a lease held, share 0 kept %d slots (%d cached: %v), want the 2 leased", st.LRUSlots, st.Cached, experts.LRUContents(s, last))
	}
	if st.SlabBytes >= slabs {
		t.Fatalf("slab bytes %d -> %d: nothing freed", slabs, st.SlabBytes)
	}
	for range 2 {
		i, x, err := held.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := digest(x); d != want[[]int{0, 1}[i]] {
			t.Fatalf("a leased expert changed under SetLRUShare")
		}
		held.Done(i)
	}
	held.Release()
	if got := take(first, []int{5}); got[5] == "" {
		t.Fatal("no expert")
	}
	if st := s.Stats(); st.LRUSlots != 0 || st.Cached != 0 {
		t.Fatalf("after the next forward began, %d LRU slots remain (%d cached)", st.LRUSlots, st.Cached)
	}
	if got := take(last, []int{0, 1, 2, 3}); !maps.Equal(got, want) {
		t.Fatal("experts streamed without a cache differ from the cached ones")
	}

	if _, err := s.SetLRUShare(-0.1); err == nil {
		t.Fatal("a negative share was taken")
	}
	if n, err := s.SetLRUShare(0.5); err != nil || n != planned/2 {
		t.Fatalf("share 0.5: %d slots, %v", n, err)
	}
	if n, err := s.SetLRUShare(1); err != nil || n != planned {
		t.Fatalf("share 1: %d slots, %v", n, err)
	}
	if got := take(last, []int{0, 1, 2, 3}); !maps.Equal(got, want) {
		t.Fatal("experts after growing back differ")
	}
	if st := s.Stats(); st.LRUSlots != planned*len(layers) || st.Cached != planned || st.SlabBytes != slabs {
		t.Fatalf("grown back: %+v (slab bytes %d, planned %d)", st, st.SlabBytes, slabs)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}
}
