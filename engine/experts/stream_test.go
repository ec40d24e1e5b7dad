package experts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/sysinfo"
)

var fixtureModels = []string{"glm52-tiny", "glm52-mini"}

// reference holds the all-resident generations of one fixture model.
type reference struct {
	prompts [][]int
	plain   [][]int // by prompt
	spec    [][]int
}

var (
	refMu   sync.Mutex
	refByFx = map[string]*reference{}
)

const genTokens = 12

func prompts(t *testing.T, model string) [][]int {
	t.Helper()
	refs, _ := fixtures.LoadRefs(t, model)
	var out [][]int
	for _, c := range refs.Cases {
		p := c.PromptIDs
		if len(p) > 24 {
			p = p[:24] // keep the tests short; the prompt only seeds decoding
		}
		out = append(out, p)
	}
	return out
}

// residentRef generates every prompt with the all-resident source.
func residentRef(t *testing.T, model string) *reference {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	if r, ok := refByFx[model]; ok {
		return r
	}
	d, err := loader.Open(context.Background(), fixtures.Path(t, model), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := &reference{prompts: prompts(t, model)}
	for _, p := range r.prompts {
		r.plain = append(r.plain, generateTokens(t, d, p, false))
		r.spec = append(r.spec, generateTokens(t, d, p, true))
	}
	refByFx[model] = r
	return r
}

func generateTokens(t *testing.T, d *loader.Dir, prompt []int, spec bool) []int {
	t.Helper()
	toks, err := tryGenerate(d, prompt, spec)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func tryGenerate(d *loader.Dir, prompt []int, spec bool) ([]int, error) {
	m := d.Model
	res, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, generate.Params{MaxTokens: genTokens, Speculative: spec}, nil)
	if err != nil {
		return nil, err
	}
	return res.Tokens, nil
}

// openStreamed opens a fixture model with a streamed source built by
// build from the slot set size (one LRU slot in every expert layer).
func openStreamed(t *testing.T, dir string, build func(set int64) experts.StreamOptions, setup func(*experts.Streamed)) (*loader.Dir, *experts.Streamed) {
	t.Helper()
	return openSource(t, dir, false, build, setup)
}

// openChecked is openStreamed with the weights fingerprinted first: the
// tier checks every read against the experts' checksums.
func openChecked(t *testing.T, dir string, build func(set int64) experts.StreamOptions, setup func(*experts.Streamed)) (*loader.Dir, *experts.Streamed) {
	t.Helper()
	return openSource(t, dir, true, build, setup)
}

func openSource(t *testing.T, dir string, checked bool, build func(set int64) experts.StreamOptions, setup func(*experts.Streamed)) (*loader.Dir, *experts.Streamed) {
	t.Helper()
	var s *experts.Streamed
	d, err := loader.OpenHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	if checked {
		if _, err := d.Fingerprint(context.Background(), fingerprint.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
			d.Close()
			t.Fatal(err)
		}
		if d.Container.Checksums().Len() == 0 {
			d.Close()
			t.Fatal("the fingerprint took no expert checksums")
		}
	}
	err = d.Load(context.Background(), loader.Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			probe, err := experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{WorkingSlots: 1})
			if err != nil {
				return nil, err
			}
			set := probe.SlotSetBytes()
			if err := probe.Close(); err != nil {
				return nil, err
			}
			s, err = experts.NewStreamed(ctx, c, cfg, layers, build(set))
			if err != nil {
				return nil, err
			}
			if setup != nil {
				setup(s)
			}
			return s, nil
		},
	})
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return d, s
}

// TestStreamedMatchesResident: streamed generation is token-exact with the
// all-resident source under budgets that evict on every token, with freed
// slabs poisoned so that a stale read would change the tokens.
func TestStreamedMatchesResident(t *testing.T) {
	budgets := []struct {
		name    string
		slots   int64 // LRU slots per layer
		working int
		workers int
		chunk   int64
	}{
		{"no cache, bank of 1", 0, 1, 1, 0},
		{"1 slot per layer, bank of 2, 4 KiB reads", 1, 2, 3, 4096},
		{"2 slots per layer, bank of 4", 2, 4, 8, 0},
		// Room to read ahead: more free working slots than a layer asks for.
		{"2 slots per layer, bank of 24, 4 KiB reads", 2, 24, 4, 4096},
	}
	for _, model := range fixtureModels {
		ref := residentRef(t, model)
		for _, v := range []struct{ packed, prefetch, repin bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false}, {false, false, true}} {
			for bi, b := range budgets {
				name := model + "/" + b.name
				dir := fixtures.Path(t, model)
				if v.packed {
					name += "/packed"
					dir = packedModel(t, model)
				}
				if v.prefetch {
					if b.working <= 16 {
						continue // no room to read ahead
					}
					name += "/prefetch"
				}
				var pinned int64
				if v.repin {
					if b.slots < 2 {
						continue
					}
					name += "/repin"
					pinned = 1
				}
				// Half the budgets check every read against the
				// weights' checksums.
				open := openStreamed
				if bi%2 == 0 {
					open, name = openChecked, name+"/checked"
				}
				t.Run(name, func(t *testing.T) {
					d, s := open(t, dir, func(set int64) experts.StreamOptions {
						o := experts.StreamOptions{CacheBytes: b.slots * set, WorkingSlots: b.working, Workers: b.workers, ReadChunk: b.chunk, Prefetch: v.prefetch}
						if v.repin {
							o.PinnedBytes, o.RepinEvery = pinned*set, 2
						}
						if v.packed {
							// Every decode loop streams some budget.
							loops := rans.Loops()
							o.Packs, o.DecodeLoop = experts.PacksRead, loops[len(loops)-1-bi%len(loops)]
						}
						return o
					}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
					for i, p := range ref.prompts {
						if got := generateTokens(t, d, p, false); !slices.Equal(got, ref.plain[i]) {
							t.Errorf("prompt %d: streamed %v, resident %v", i, got, ref.plain[i])
						}
						if got := generateTokens(t, d, p, true); !slices.Equal(got, ref.spec[i]) {
							t.Errorf("prompt %d speculative: streamed %v, resident %v", i, got, ref.spec[i])
						}
					}
					st := s.Stats()
					if st.Total.Misses == 0 || st.Total.BytesRead == 0 {
						t.Errorf("no misses: %+v", st.Total)
					}
					// Every forward misses: the cache is far smaller than a
					// token's experts.
					if st.Total.Misses < int64(st.Forwards) {
						t.Errorf("%d misses over %d forwards: the budget does not force eviction", st.Total.Misses, st.Forwards)
					}
					if c := st.Total; v.packed && (c.Unpacked < c.Misses || c.Unpacked > c.Misses+c.PrefetchCancelled || c.Decoded == 0) {
						t.Errorf("packed model: %d of %d misses decoded (%d bytes)", st.Total.Unpacked, st.Total.Misses, st.Total.Decoded)
					}
					if err := experts.CheckInvariants(s, true); err != nil {
						t.Error(err)
					}
					t.Logf("%d forwards, hit rate %.2f, %d misses, %d bytes read, %d read ahead (%d used, %d cancelled)", st.Forwards, st.Total.HitRate(), st.Total.Misses, st.Total.BytesRead,
						st.Total.Prefetched, st.Total.PrefetchHits, st.Total.PrefetchCancelled)
				})
			}
		}
	}
}

// TestReadErrorThenRecover: a read error at the Nth read fails the
// generation with an error naming the expert and the file; the cache stays
// consistent and the next generation is exact.
func TestReadErrorThenRecover(t *testing.T) {
	for _, model := range fixtureModels {
		t.Run(model, func(t *testing.T) {
			ref := residentRef(t, model)
			d, s := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
				return experts.StreamOptions{CacheBytes: 2 * set, WorkingSlots: 2, Workers: 4}
			}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
			injected := errors.New("injected I/O error")
			for _, nth := range []int64{1, 7, 40} {
				experts.SetFault(s, func(n int64) error {
					if n == nth {
						return injected
					}
					return nil
				})
				_, err := tryGenerate(d, ref.prompts[0], false)
				if !errors.Is(err, injected) {
					t.Fatalf("read %d: error %v, want the injected one", nth, err)
				}
				if msg := err.Error(); !strings.Contains(msg, "expert") || !strings.Contains(msg, ".safetensors") {
					t.Errorf("error %q names no expert or file", msg)
				}
				if err := experts.CheckInvariants(s, true); err != nil {
					t.Fatalf("after the error at read %d: %v", nth, err)
				}
				experts.SetFault(s, nil)
				if got := generateTokens(t, d, ref.prompts[0], false); !slices.Equal(got, ref.plain[0]) {
					t.Errorf("after the error at read %d: %v, want %v", nth, got, ref.plain[0])
				}
			}
		})
	}
}

// TestShortReadThenRecover truncates the shard that holds the experts:
// generation fails with a short read naming the expert and the file.
// Once the file is whole again, a source that has the weights' checksums
// (fingerprinted) checks the restored bytes and generates exactly; one
// that has none refuses the shard rewritten in place.
func TestShortReadThenRecover(t *testing.T) {
	model := "glm52-tiny"
	ref := residentRef(t, model)
	for _, checked := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksums=%v", checked), func(t *testing.T) {
			dir := copyModel(t, fixtures.Path(t, model))
			shard := filepath.Join(dir, "out-00000.safetensors")
			whole, err := os.ReadFile(shard)
			if err != nil {
				t.Fatal(err)
			}
			build := func(set int64) experts.StreamOptions {
				return experts.StreamOptions{CacheBytes: set, WorkingSlots: 2, Workers: 2}
			}
			poison := func(s *experts.Streamed) { experts.SetPoison(s, true) }
			var d *loader.Dir
			var s *experts.Streamed
			if checked {
				d, s = openChecked(t, dir, build, poison)
			} else {
				d, s = openStreamed(t, dir, build, poison)
			}
			if err := os.Truncate(shard, int64(len(whole))/2); err != nil {
				t.Fatal(err)
			}
			_, err = tryGenerate(d, ref.prompts[0], false)
			var short *diskio.ShortReadError
			var re *experts.ReadError
			if !errors.As(err, &short) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &re) || !re.Damaged() {
				t.Fatalf("error %v, want a short read", err)
			}
			if re.File != "out-00000.safetensors" || !strings.Contains(err.Error(), "out-00000.safetensors") || !strings.Contains(err.Error(), "expert") {
				t.Errorf("error %q names no expert or file", err)
			}
			if err := experts.CheckInvariants(s, true); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(shard, whole, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := tryGenerate(d, ref.prompts[0], false)
			if !checked {
				if !errors.Is(err, experts.ErrChanged) || !errors.As(err, &re) || re.File != "out-00000.safetensors" {
					t.Fatalf("a shard rewritten in place with no checksums: %v, want ErrChanged naming it", err)
				}
				return
			}
			if err != nil || !slices.Equal(got, ref.plain[0]) {
				t.Errorf("after restoring the shard: %v (%v), want %v", got, err, ref.plain[0])
			}
		})
	}
}

func copyModel(t *testing.T, src string) string { return fixtures.CopyModel(t, src) }

// TestFootprintGuard: a footprint above the limit makes the LRU give slots
// back at safe points; generation stays exact and the slabs shrink.
func TestFootprintGuard(t *testing.T) {
	model := "glm52-mini"
	ref := residentRef(t, model)
	d, s := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 6 * set, WorkingSlots: 3, FootprintLimit: 1, GuardEvery: 2}
	}, func(s *experts.Streamed) {
		experts.SetPoison(s, true)
		experts.SetFootprint(s, func() (uint64, error) { return 1 << 40, nil })
	})
	before := s.Stats()
	if got := generateTokens(t, d, ref.prompts[0], false); !slices.Equal(got, ref.plain[0]) {
		t.Errorf("%v, want %v", got, ref.plain[0])
	}
	after := s.Stats()
	if after.Shrinks == 0 || after.LRUSlots >= before.LRUSlots || after.SlabBytes >= before.SlabBytes {
		t.Errorf("guard did not shrink: before %d slots %d bytes, after %d slots %d bytes, %d shrinks",
			before.LRUSlots, before.SlabBytes, after.LRUSlots, after.SlabBytes, after.Shrinks)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Error(err)
	}
}

// TestMemoryUnderBudget: the slabs never exceed the cache budget plus the
// working bank, and the process footprint grows by no more than the slabs
// (plus slack for the Go heap) while streaming.
func TestMemoryUnderBudget(t *testing.T) {
	model := "glm52-mini"
	ref := residentRef(t, model)
	const working = 4
	var set int64
	d, s := openStreamed(t, fixtures.Path(t, model), func(r int64) experts.StreamOptions {
		set = r
		return experts.StreamOptions{CacheBytes: 3*r + r/2, WorkingSlots: working}
	}, nil)
	st := s.Stats()
	budget := 3*set + set/2
	// Decoder and MTP working banks: at most working slots of the widest
	// class each, bounded by one slot set per slot.
	if max := budget + int64(working)*set; st.SlabBytes > max {
		t.Errorf("slabs take %d bytes, budget %d + working bank", st.SlabBytes, budget)
	}
	if st.LRUSlots != 3*len(st.Layers) {
		t.Errorf("%d LRU slots over %d layers, want 3 each", st.LRUSlots, len(st.Layers))
	}
	fp0, err := sysinfo.Footprint()
	if err != nil {
		t.Skip("no footprint on this system:", err)
	}
	for i, p := range ref.prompts {
		if got := generateTokens(t, d, p, false); !slices.Equal(got, ref.plain[i]) {
			t.Errorf("prompt %d: %v, want %v", i, got, ref.plain[i])
		}
	}
	fp1, err := sysinfo.Footprint()
	if err != nil {
		t.Fatal(err)
	}
	const slack = 256 << 20
	if grow := int64(fp1.Footprint) - int64(fp0.Footprint); grow > st.SlabBytes+slack {
		t.Errorf("footprint grew by %d bytes while streaming, slabs %d", grow, st.SlabBytes)
	}
}

// TestChurn runs leases from several goroutines with random expert sets,
// early releases and skipped Done calls, checking every delivered expert's
// bytes against a resident copy; freed slabs are poisoned, so a stale or
// partially filled slot would not compare equal.
func TestChurn(t *testing.T) {
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
	s, err := experts.NewStreamed(context.Background(), c, cfg, layers, experts.StreamOptions{CacheBytes: 3 * set, WorkingSlots: 5, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	experts.SetPoison(s, true)

	const goroutines, leases = 4, 60
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(uint64(g) + 1)
			for range leases {
				l := layers[rng.intn(len(layers))]
				n := 1 + rng.intn(12)
				ids := rng.sample(cfg.NumRoutedExperts, n)
				if err := churnLease(s, l, ids, want, rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}
}

func churnLease(s *experts.Streamed, layer int, ids []int, want map[[2]int]string, rng *xorshift) error {
	lease, err := s.Acquire(context.Background(), layer, ids)
	if err != nil {
		return err
	}
	defer lease.Release()
	stopAfter := len(ids)
	if rng.intn(4) == 0 {
		stopAfter = rng.intn(len(ids))
	}
	for got := 0; got < stopAfter; got++ {
		i, x, err := lease.Next(context.Background())
		if err != nil {
			return fmt.Errorf("layer %d ids %v: %w", layer, ids, err)
		}
		if d := digest(x); d != want[[2]int{layer, ids[i]}] {
			return fmt.Errorf("layer %d expert %d: delivered bytes differ from the resident copy", layer, ids[i])
		}
		// Read it again after other leases had a chance to run.
		if rng.intn(3) == 0 {
			runtimeYield()
			if d := digest(x); d != want[[2]int{layer, ids[i]}] {
				return fmt.Errorf("layer %d expert %d: bytes changed while leased", layer, ids[i])
			}
		}
		lease.Done(i)
	}
	return nil
}

// TestUsagePinning: a run records usage and saves it at Close; the next
// source pins the hottest experts from it, hits them, stays exact, and
// shows them in the expert map.
func TestUsagePinning(t *testing.T) {
	model := "glm52-mini"
	ref := residentRef(t, model)
	usage := filepath.Join(t.TempDir(), ".coli_usage")
	d, s := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 2 * set, WorkingSlots: 3, UsagePath: usage}
	}, nil)
	if got := generateTokens(t, d, ref.prompts[0], false); !slices.Equal(got, ref.plain[0]) {
		t.Fatalf("%v, want %v", got, ref.plain[0])
	}
	bits := s.HitBitmap()
	routed := 0
	for _, b := range bits {
		routed += popcount(b)
	}
	if routed == 0 {
		t.Fatal("hit bitmap is empty after a generation")
	}
	for _, b := range s.HitBitmap() {
		if b != 0 {
			t.Fatal("hit bitmap not cleared by the previous call")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(usage)
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.Config
	u, err := experts.ParseUsage(raw, cfg.NumLayers, cfg.NumRoutedExperts)
	if err != nil || u.Total() == 0 {
		t.Fatalf("saved history: %v, total %d", err, u.Total())
	}

	d2, s2 := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 4 * set, PinnedBytes: 2 * set, WorkingSlots: 3, UsagePath: usage}
	}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
	st := s2.Stats()
	if st.Pinned == 0 {
		t.Fatal("nothing pinned from the history")
	}
	for i, p := range ref.prompts {
		if got := generateTokens(t, d2, p, false); !slices.Equal(got, ref.plain[i]) {
			t.Errorf("prompt %d: %v, want %v", i, got, ref.plain[i])
		}
		if got := generateTokens(t, d2, p, true); !slices.Equal(got, ref.spec[i]) {
			t.Errorf("prompt %d speculative: %v, want %v", i, got, ref.spec[i])
		}
	}
	st = s2.Stats()
	if st.Total.PinnedHits == 0 {
		t.Error("no pinned hits")
	}
	pinnedInMap := 0
	for _, b := range s2.ExpertMap() {
		if b>>6 == experts.MapPinned {
			pinnedInMap++
		}
	}
	if pinnedInMap != st.Pinned {
		t.Errorf("expert map shows %d pinned experts, stats %d", pinnedInMap, st.Pinned)
	}
	if err := experts.CheckInvariants(s2, true); err != nil {
		t.Error(err)
	}
	t.Logf("%d pinned, hit rate %.2f (pinned %d of %d hits)", st.Pinned, st.Total.HitRate(), st.Total.PinnedHits, st.Total.Hits)
}

func popcount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}
