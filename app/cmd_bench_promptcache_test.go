package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestBenchPromptCache: the bench restores the prompt's blocks from memory
// and from disk and reports the ratios (their size is the bench's to
// measure, not a test's).
func TestBenchPromptCache(t *testing.T) {
	cmd := newBenchPromptCacheCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--model", fixtures.Path(t, "glm52-mini"), "--tokens", "200", "--turn", "8", "--dir", t.TempDir(), "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r bench.PromptCacheResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	block := int64(16 * 4 * (6*(64+16) + 3*32)) // 16 tokens of glm52-mini's state, without MTP rows
	if r.MemoryCachedTokens != 192 || r.DiskCachedTokens != 192 || r.DiskReadBytes < 12*block || r.BlockBytes < block || r.MemoryTierBytes < 12*block {
		t.Errorf("result %+v", r)
	}
	if r.ColdTTFTSeconds <= 0 || r.MemorySpeedup <= 0 || r.DiskSpeedup <= 0 || r.DiskWrittenBytes < 12*block {
		t.Errorf("result %+v", r)
	}
	for _, bad := range [][]string{{"--tokens", "3"}, {"--turn", "0"}, {"--tokens", "40000"}} {
		cmd := newBenchPromptCacheCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--model", fixtures.Path(t, "glm52-mini")}, bad...))
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
