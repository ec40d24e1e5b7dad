package expertpack

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestUnpackerConcurrent: several goroutines decoding one record in place
// as its bytes land in random-sized pieces rebuild exactly the region, and
// the combined checksums verify; the blocks run out of order.
func TestUnpackerConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	region := make([]byte, 9*BlockLen+12345)
	for i := range region {
		region[i] = byte(0x88 + rng.IntN(3) - 1 + 16*(rng.IntN(3)-1))
	}
	scales := make([]byte, 4096)
	for i := range scales {
		scales[i] = byte(rng.Uint32())
	}
	rec, err := BuildRecord(region, []int64{3 * BlockLen, 3 * BlockLen, 3*BlockLen + 12345}, scales, false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRecord(rec, int64(len(rec)))
	if err != nil {
		t.Fatal(err)
	}
	want := crcCombine(crcOf(region), crcOf(scales), int64(len(scales)))
	for trial := 0; trial < 20; trial++ {
		at := r.SlabAt(RecordAlign)
		slab := make([]byte, max(at+int64(len(rec)), r.RegionLen))
		u, err := NewUnpacker(r, slab, at)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		done := false
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					stepped, all, err := u.Step(slab)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					finished := done
					mu.Unlock()
					if all || finished && !stepped {
						return
					}
				}
			}()
		}
		for landed := int64(0); landed < int64(len(rec)); {
			n := min(int64(len(rec))-landed, 1+rng.Int64N(200<<10))
			copy(slab[at+landed:], rec[landed:landed+n])
			landed += n
			u.Land(landed)
		}
		mu.Lock()
		done = true
		mu.Unlock()
		wg.Wait()
		for { // what the helpers left, on this goroutine
			stepped, _, err := u.Step(slab)
			if err != nil {
				t.Fatal(err)
			}
			if !stepped {
				break
			}
		}
		if !bytes.Equal(slab[:r.RegionLen], region) {
			t.Fatalf("trial %d: the rebuilt region differs", trial)
		}
		if err := u.Verify(slab, want); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
	}
}

func crcOf(b []byte) uint32 { return Checksum(b, nil) }
