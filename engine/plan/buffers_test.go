package plan

import (
	"strings"
	"testing"
)

// TestPrefillChunkFromBudget: the chunk is the largest whose buffer lines
// fit half of what the fixed lines leave, grows with the memory, never
// passes the context, and a fixed chunk is honoured.
func TestPrefillChunkFromBudget(t *testing.T) {
	p32 := realPlan(t, Options{Memory: 32 * gib, Threads: 10})
	if p32.PrefillChunk < 2048 || p32.PrefillChunk > p32.Context {
		t.Errorf("GLM-5.2 at 32 GiB: prefill chunk %d, want thousands of rows up to the context %d", p32.PrefillChunk, p32.Context)
	}
	var buffers, checksums int64
	for _, it := range p32.Items {
		switch it.Name {
		case ItemActivations, ItemLogits, ItemWorkers, ItemAttention, ItemAttentionProjections, ItemDecoders:
			buffers += it.Bytes
		case ItemChecksums:
			checksums += it.Bytes
		}
	}
	if buffers > p32.ActivationBudgetBytes {
		t.Errorf("buffer lines %d exceed the activation budget %d", buffers, p32.ActivationBudgetBytes)
	}
	if p32.BatchRows != p32.PrefillChunk || p32.LogitRows != 2 {
		t.Errorf("one sequence: %d rows and %d logit rows per forward for a chunk of %d", p32.BatchRows, p32.LogitRows, p32.PrefillChunk)
	}
	if checksums <= 0 || checksums > 8<<20 {
		t.Errorf("GLM-5.2's expert checksums take %d bytes, want a few MiB", checksums)
	}
	if want := p32.KVBytes + DefaultRuntimeReserve + buffers + checksums; p32.GoMemoryLimitBytes != want {
		t.Errorf("Go memory limit %d, want the heap lines' %d", p32.GoMemoryLimitBytes, want)
	}

	long := realPlan(t, Options{Memory: 64 * gib, Context: 16384, Threads: 10})
	short := realPlan(t, Options{Memory: 24 * gib, Context: 16384, Threads: 10})
	if !long.Fits || !short.Fits || long.PrefillChunk <= short.PrefillChunk || short.PrefillChunk < MinPrefillChunk {
		t.Errorf("chunk %d at 64 GiB, %d at 24 GiB", long.PrefillChunk, short.PrefillChunk)
	}
	if tiny := realPlan(t, Options{Memory: 32 * gib, Context: 100}); tiny.PrefillChunk != 100 {
		t.Errorf("context 100: chunk %d", tiny.PrefillChunk)
	}
	fixed := realPlan(t, Options{Memory: 32 * gib, BatchRows: 300, Sequences: 4})
	if fixed.PrefillChunk != 300 || fixed.BatchRows != 303 || fixed.LogitRows != 4 {
		t.Errorf("fixed chunk: chunk %d, rows %d, logit rows %d", fixed.PrefillChunk, fixed.BatchRows, fixed.LogitRows)
	}
}

// TestBufferLinesGrow: every buffer line grows (or stays) with the rows,
// the context and the threads, so the chunk search is sound; the GPU's
// lines too.
func TestBufferLinesGrow(t *testing.T) {
	cfg := realConfig(t)
	w, _ := FromConfig(cfg, Artifact{WithIndexer: true})
	cpu := Shape{Config: cfg, DSA: w.DSA, MTP: w.MTP, Context: 4096, Sequences: 2, Chunk: 512, Rows: 513, LogitRows: 2, Threads: 4}
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
		func(s Shape) Shape { s.Chunk, s.Rows = 2*s.Chunk, 2*s.Chunk+1; return s },
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
