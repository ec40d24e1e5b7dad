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
