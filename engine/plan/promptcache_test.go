package plan

import (
	"strings"
	"testing"
)

func TestPromptCacheItems(t *testing.T) {
	m := PromptCacheMemory{TierBytes: 512 << 20, BacklogBytes: 64 << 20, ReadBuffers: 2, ReadBufferBytes: 6 << 20, WriteBufferBytes: 3 << 20, BlockTokens: 16, BlockBytes: 3 << 20}
	items := PromptCacheItems(m)
	if len(items) != 2 || items[0].Name != ItemPromptCache || items[1].Name != ItemPromptCacheIO {
		t.Fatalf("items %+v", items)
	}
	if items[0].Bytes != 576<<20 || items[1].Bytes != 15<<20 {
		t.Errorf("bytes %d and %d", items[0].Bytes, items[1].Bytes)
	}
	if !strings.Contains(items[0].Detail, "512.00 MiB") || !strings.Contains(items[0].Detail, "16-token blocks") {
		t.Errorf("detail %q", items[0].Detail)
	}
	if got := PromptCacheItems(PromptCacheMemory{}); len(got) != 0 {
		t.Errorf("no cache gave lines %+v", got)
	}
	if got := PromptCacheItems(PromptCacheMemory{TierBytes: 1 << 20}); len(got) != 1 || got[0].Bytes != 1<<20 {
		t.Errorf("memory only: %+v", got)
	}
}

// TestPromptCacheBlockReal pins the size of a GLM-5.2 block that the
// prompt cache's documentation quotes: 16 tokens of 78 layers' KV rows, 21
// layers' indexer keys and the MTP rows, about 3 MiB.
func TestPromptCacheBlockReal(t *testing.T) {
	cfg := realConfig(t)
	w, err := FromConfig(cfg, Artifact{WithIndexer: true})
	if err != nil {
		t.Fatal(err)
	}
	g := CacheGeometry(cfg, w)
	if want := 78*(512+64) + 21*128; g.MainFloats() != want {
		t.Fatalf("main state per token %d floats, want %d", g.MainFloats(), want)
	}
	bytes := 4 * int64(g.BlockFloats(16, 32, true))
	if bytes < 2900<<10 || bytes > 3<<20 {
		t.Errorf("a block is %d bytes", bytes)
	}
	if g.BytesPerToken()*16 != bytes {
		t.Errorf("block %d bytes, 16 x BytesPerToken %d", bytes, g.BytesPerToken()*16)
	}
}

// TestPromptCachePlanned: a plan with a prompt cache sizes its memory tier
// from what the fixed lines leave (a PromptCacheShare-th, at most one
// context of blocks, whole blocks), counts its lines in the process and the
// Go heap, and leaves the expert cache what remains; a fixed tier is kept.
func TestPromptCachePlanned(t *testing.T) {
	const block = 3 << 20
	m := PromptCacheMemory{BacklogBytes: 67 << 20, ReadBuffers: 2, ReadBufferBytes: 6 << 20, WriteBufferBytes: block, BlockTokens: 16, BlockBytes: block}
	base := realPlan(t, Options{Memory: 32 * gib, Context: 32768})
	p := realPlan(t, Options{Memory: 32 * gib, Context: 32768, PromptCache: &m})
	if !base.Fits || !p.Fits {
		t.Fatalf("fits: %v %v", base.Fits, p.Fits)
	}
	tier, ok := p.Item(ItemPromptCache)
	io, ok2 := p.Item(ItemPromptCacheIO)
	if !ok || !ok2 {
		t.Fatalf("no prompt cache lines: %+v", p.Items)
	}
	left := base.MemoryLimitBytes - (base.PlannedProcessBytes - base.ExpertCacheBytes) - m.BacklogBytes - io.Bytes
	if p.PromptCacheBytes <= 0 || p.PromptCacheBytes%block != 0 || p.PromptCacheBytes > left/PromptCacheShare || p.PromptCacheBytes+block <= left/PromptCacheShare {
		t.Errorf("memory tier %d of %d left", p.PromptCacheBytes, left)
	}
	if tier.Bytes != p.PromptCacheBytes+m.BacklogBytes || io.Bytes != 2*(6<<20)+block {
		t.Errorf("lines %d and %d", tier.Bytes, io.Bytes)
	}
	// The expert cache comes in slot sets (GiB-sized): it may absorb the
	// tier in its rounding, never exceed what is left.
	if p.ExpertCacheBytes > base.ExpertCacheBytes || p.PlannedProcessBytes > p.MemoryLimitBytes || p.PlannedProcessBytes != base.PlannedProcessBytes+tier.Bytes+io.Bytes-(base.ExpertCacheBytes-p.ExpertCacheBytes) {
		t.Errorf("expert cache %d (without the prompt cache %d), planned %d of %d", p.ExpertCacheBytes, base.ExpertCacheBytes, p.PlannedProcessBytes, p.MemoryLimitBytes)
	}
	if p.GoMemoryLimitBytes != base.GoMemoryLimitBytes+tier.Bytes+io.Bytes {
		t.Errorf("Go memory limit %d, without the prompt cache %d", p.GoMemoryLimitBytes, base.GoMemoryLimitBytes)
	}
	// Plenty of memory: one context of blocks.
	big := realPlan(t, Options{Memory: 512 * gib, Context: 4096, PromptCache: &m})
	if big.PromptCacheBytes != 4096/16*block {
		t.Errorf("512 GiB, 4096 tokens: tier %d, want one context of blocks %d", big.PromptCacheBytes, 4096/16*block)
	}
	fixed := m
	fixed.TierBytes = 100 * block
	if f := realPlan(t, Options{Memory: 32 * gib, PromptCache: &fixed}); f.PromptCacheBytes != fixed.TierBytes {
		t.Errorf("fixed tier %d planned as %d", fixed.TierBytes, f.PromptCacheBytes)
	}
}
