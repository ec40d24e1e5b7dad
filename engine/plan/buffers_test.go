package plan

import (
	"strings"
	"testing"
)

// TestPrefillSegmentFromBudget: the segment is the longest whose buffer
// lines fit the prefill budget, grows with the memory, never passes the
// context, holds a 32k context's worth of an agent's prompt on 32 GiB,
// and a fixed segment is honoured; the scratch stays bounded.
func TestPrefillSegmentFromBudget(t *testing.T) {
	p32 := realPlan(t, Options{Memory: 32 * gib, Threads: 10})
	if p32.PrefillSegment != p32.Context {
		t.Errorf("GLM-5.2 at 32 GiB: prefill segment %d, want the whole context %d", p32.PrefillSegment, p32.Context)
	}
	var buffers, checksums int64
	for _, it := range p32.Items {
		switch it.Name {
		case ItemSegment, ItemScratch, ItemLogits, ItemWorkers, ItemAttention, ItemAttentionProjections, ItemDecoders:
			buffers += it.Bytes
		case ItemChecksums:
			checksums += it.Bytes
		}
	}
	if buffers > p32.PrefillBudgetBytes {
		t.Errorf("buffer lines %d exceed the prefill budget %d", buffers, p32.PrefillBudgetBytes)
	}
	if p32.BatchRows != p32.PrefillSegment || p32.LogitRows != 2 || p32.ScratchRows != PrefillScratchRows {
		t.Errorf("one sequence: %d rows, %d scratch rows and %d logit rows per forward for a segment of %d", p32.BatchRows, p32.ScratchRows, p32.LogitRows, p32.PrefillSegment)
	}
	if checksums <= 0 || checksums > 8<<20 {
		t.Errorf("GLM-5.2's expert checksums take %d bytes, want a few MiB", checksums)
	}
	embed, _ := p32.Item(ItemEmbedding)
	if want := p32.KVBytes + DefaultRuntimeReserve + embed.Bytes + buffers + checksums; p32.GoMemoryLimitBytes != want {
		t.Errorf("Go memory limit %d, want the heap lines' %d", p32.GoMemoryLimitBytes, want)
	}
	// A row of a segment keeps the residual stream, the experts' sum and
	// the MTP layer's residual stream: 3 x 6144 float32 and its routes,
	// not the 337 KiB a row of a chunk held.
	if seg, _ := p32.Item(ItemSegment); seg.Bytes/int64(p32.BatchRows) > 75_000 {
		t.Errorf("a segment row costs %d bytes", seg.Bytes/int64(p32.BatchRows))
	}

	long := realPlan(t, Options{Memory: 64 * gib, Context: 32768, Threads: 10})
	short := realPlan(t, Options{Memory: 24 * gib, Context: 32768, Threads: 10})
	if !long.Fits || !short.Fits || long.PrefillSegment < short.PrefillSegment || short.PrefillSegment < MinPrefillSegment {
		t.Errorf("segment %d at 64 GiB, %d at 24 GiB", long.PrefillSegment, short.PrefillSegment)
	}
	if long.PrefillSegment != long.Context {
		t.Errorf("64 GiB: segment %d of a %d context", long.PrefillSegment, long.Context)
	}
	if agent := realPlan(t, Options{Memory: 32 * gib, Context: 32768, Threads: 10}); agent.PrefillSegment < 16384 {
		t.Errorf("32 GiB, 32k context: segment %d, want an agent's 16k-token prompt at once", agent.PrefillSegment)
	}
	if tiny := realPlan(t, Options{Memory: 32 * gib, Context: 100}); tiny.PrefillSegment != 100 || tiny.ScratchRows != 100 {
		t.Errorf("context 100: segment %d, scratch %d", tiny.PrefillSegment, tiny.ScratchRows)
	}
	fixed := realPlan(t, Options{Memory: 32 * gib, Segment: 300, Sequences: 4})
	if fixed.PrefillSegment != 300 || fixed.BatchRows != 303 || fixed.LogitRows != 4 || fixed.ScratchRows != 303 {
		t.Errorf("fixed segment: segment %d, rows %d, logit rows %d, scratch %d", fixed.PrefillSegment, fixed.BatchRows, fixed.LogitRows, fixed.ScratchRows)
	}
}

// TestBufferLinesGrow: every buffer line grows (or stays) with the rows,
// the scratch rows, the context and the threads, so the segment search is
// sound; the GPU's lines too.
func TestBufferLinesGrow(t *testing.T) {
	cfg := realConfig(t)
	w, _ := FromConfig(cfg, Artifact{WithIndexer: true})
	cpu := Shape{Config: cfg, DSA: w.DSA, MTP: w.MTP, Context: 4096, Sequences: 2, Segment: 512, Rows: 513, ScratchRows: 256, LogitRows: 2, Threads: 4}
	gpu := cpu
	gpu.GPU = &GPUDevice{Unified: true}
	if n, m := len(BufferItems(cpu)), len(BufferItems(gpu)); m != n+2 {
		t.Errorf("%d lines with a unified GPU, %d without", m, n)
	}
	for _, base := range []Shape{cpu, gpu} {
		testLinesGrow(t, base)
	}
}

func testLinesGrow(t *testing.T, base Shape) {
	for _, grow := range []func(Shape) Shape{
		func(s Shape) Shape { s.Segment, s.Rows = 2*s.Segment, 2*s.Segment+1; return s },
		func(s Shape) Shape { s.ScratchRows *= 2; return s },
		func(s Shape) Shape { s.Context *= 2; return s },
		func(s Shape) Shape { s.Threads *= 2; return s },
		func(s Shape) Shape { s.Sequences, s.LogitRows = 4, 4; return s },
	} {
		a, b := BufferItems(base), BufferItems(grow(base))
		if len(a) != len(b) {
			t.Fatalf("%d lines, then %d", len(a), len(b))
		}
		for i := range a {
			if b[i].Bytes < a[i].Bytes || a[i].Bytes <= 0 || a[i].Detail == "" {
				t.Errorf("%s: %d bytes, then %d", a[i].Name, a[i].Bytes, b[i].Bytes)
			}
		}
	}
}

func TestCheckPrompt(t *testing.T) {
	p := realPlan(t, Options{Memory: 32 * gib, Context: 1024})
	if err := p.CheckPrompt(1024); err != nil {
		t.Errorf("a prompt of the context's length: %v", err)
	}
	err := p.CheckPrompt(1025)
	if err == nil || !strings.Contains(err.Error(), ItemKV) || !strings.Contains(err.Error(), "1024") {
		t.Errorf("overlong prompt: %v", err)
	}
}

// TestSegmentAndCacheFloor: the expert cache keeps its floor (one slot
// per hundred experts: GLM-5.2's 3) before the segment grows, the segment
// takes half of the rest up to the whole context, and then what the cache
// cannot turn into a whole slot: GLM-5.2 on 24 GiB with a 32k context and
// the prompt cache gets 3 slots and a segment that leaves less than a slot
// row unused; on 32 GiB the whole context is one segment.
func TestSegmentAndCacheFloor(t *testing.T) {
	cfg := realConfig(t)
	w, err := FromConfig(cfg, Artifact{})
	if err != nil {
		t.Fatal(err)
	}
	pc := PromptCacheMemory{BacklogBytes: 67 << 20, ReadBuffers: 2, ReadBufferBytes: 6 << 20, WriteBufferBytes: 3 << 20, BlockTokens: 16, BlockBytes: 2_935_296}
	opts := Options{Memory: 24 * gib, Context: 32768, Threads: 10, PromptCache: &pc}
	budget, err := build(cfg, w, opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, w, opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.cacheFloorSlots() != 3 || !p.Fits || p.CacheSlotsPerLayer != 3 || p.CacheSlotsPerLayer != budget.CacheSlotsPerLayer {
		t.Errorf("24 GiB: %d slots (floor %d, the budget's %d)", p.CacheSlotsPerLayer, p.cacheFloorSlots(), budget.CacheSlotsPerLayer)
	}
	if p.PrefillSegment <= budget.PrefillSegment || p.PrefillSegment < 4096 || p.MemoryLimitBytes-p.PlannedProcessBytes >= p.SlotSetBytes {
		t.Errorf("24 GiB: segment %d (the budget's %d), %d bytes left under the limit", p.PrefillSegment, budget.PrefillSegment, p.MemoryLimitBytes-p.PlannedProcessBytes)
	}
	if p.PlannedProcessBytes > p.MemoryLimitBytes || p.PrefillBudgetBytes != budget.PrefillBudgetBytes {
		t.Errorf("planned %d of %d, budget %d (was %d)", p.PlannedProcessBytes, p.MemoryLimitBytes, p.PrefillBudgetBytes, budget.PrefillBudgetBytes)
	}
	opts.Memory = 32 * gib
	if p, _ := New(cfg, w, opts); p.PrefillSegment != p.Context || p.CacheSlotsPerLayer < 6 {
		t.Errorf("32 GiB: segment %d of %d, %d slots", p.PrefillSegment, p.Context, p.CacheSlotsPerLayer)
	}
	opts.Memory = 16 * gib
	if p, _ := New(cfg, w, Options{Memory: 16 * gib, Threads: 10}); !p.Fits || p.CacheSlotsPerLayer != 1 || p.PrefillSegment < MinPrefillSegment {
		t.Errorf("16 GiB: fits %v, %d slots, segment %d", p.Fits, p.CacheSlotsPerLayer, p.PrefillSegment)
	}
}
