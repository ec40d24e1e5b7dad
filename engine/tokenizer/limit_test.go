package tokenizer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

func TestEncodeLimitStopsEarly(t *testing.T) {
	tok := loadFixture(t)
	text := strings.Repeat("<|user|>\nHello there, how are you today? ", 2000)
	all := tok.Encode(text)
	for _, limit := range []int{0, 1, 7, 100, len(all) - 1, len(all), len(all) + 5} {
		ids, ok := tok.EncodeLimit(text, limit)
		if ok != (len(all) <= limit) {
			t.Errorf("limit %d of %d tokens: ok = %v", limit, len(all), ok)
		}
		if ok && !slices.Equal(ids, all) {
			t.Errorf("limit %d: a text that fits encodes differently", limit)
		}
		if !ok && (len(ids) <= limit || !slices.Equal(ids[:limit+1], all[:limit+1])) {
			t.Errorf("limit %d: got %d tokens, want a prefix of more than the limit", limit, len(ids))
		}
		// It stops soon after the limit, not at the end of the text.
		if !ok && len(ids) > limit+64 {
			t.Errorf("limit %d: went on to %d tokens", limit, len(ids))
		}
	}
}

// A tokenizer.json past the size limit is refused by its size, without
// reading it: a 500 MB one cost 1.2-4 GB before it was refused.
func TestHugeTokenizerIsRefusedUnread(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "tokenizer.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(500 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, bytes.Repeat([]byte(" "), 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		limit int64
	}{{huge, MaxFileBytes}, {small, 1024}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := loadLimit(tc.path, tc.limit)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("%s with a limit of %d: %v", tc.path, tc.limit, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
			t.Errorf("refusing %s allocated %d bytes", tc.path, grew)
		}
	}
}

// Parsing allocates at most ParseAllocFactor times its input, on GLM's
// tokenizer and on hostile shapes (long lists of added tokens, merges,
// tiny vocabulary entries) refused late; so the largest file accepted
// costs at most the memory plan's runtime reserve (and it is parsed before
// any weight is loaded).
func TestParseAllocationIsBounded(t *testing.T) {
	if MaxFileBytes*ParseAllocFactor > plan.DefaultRuntimeReserve {
		t.Fatalf("a %d-byte tokenizer may cost %d bytes, more than the runtime reserve %d", MaxFileBytes, MaxFileBytes*ParseAllocFactor, plan.DefaultRuntimeReserve)
	}
	glm, err := os.ReadFile(fixtures.Path(t, "glm52-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	synthetic, err := SyntheticJSON(20000, []string{"<|user|>"})
	if err != nil {
		t.Fatal(err)
	}
	list := func(head string, item func(int) string, tail string, n int) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(item(i))
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"glm52-mini", glm},
		{"synthetic", synthetic},
		{"added tokens", list(`{"added_tokens":[`, func(i int) string { return fmt.Sprintf(`{"id":%d,"content":"<%x>","special":true}`, i+3, i) }, `],"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[]}}`, 20000)},
		{"merges", list(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[`, func(int) string { return `"a b"` }, `]}}`, 100000)},
		{"tiny vocabulary", list(`{"model":{"type":"BPE","vocab":{`, func(i int) string { return fmt.Sprintf(`"%x":%d`, i, i) }, `},"merges":[]}}`, 100000)},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		Parse(tc.data)
		runtime.ReadMemStats(&after)
		t.Logf("%s: %d bytes, %.2f allocated per byte", tc.name, len(tc.data), float64(after.TotalAlloc-before.TotalAlloc)/float64(len(tc.data)))
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(ParseAllocFactor*len(tc.data)) {
			t.Errorf("%s: parsing %d bytes allocated %d (%.1f per byte), more than %d per byte", tc.name, len(tc.data), grew, float64(grew)/float64(len(tc.data)), ParseAllocFactor)
		}
	}
}
