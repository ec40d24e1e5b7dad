package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
)

// namedModel copies the fixture model fixture into a directory called name.
func namedModel(t *testing.T, fixture, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.Rename(fixtures.CopyModel(t, fixtures.Path(t, fixture)), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestUsageHistoryPerModel: two models in directories of one name (a
// second gen-bench into the same --out) keep a usage history each, keyed
// by their identity: neither reads, sets aside or overwrites the other's,
// and each opens again with its own.
func TestUsageHistoryPerModel(t *testing.T) {
	usage := t.TempDir()
	ctx := context.Background()
	run := func(dir string) {
		t.Helper()
		e, err := Open(ctx, Config{ModelDir: dir, Context: 256, MaxBatch: 1, UsageDir: usage, PromptCache: PromptCache{Off: true}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.Scheduler.Run(runCtx)
		}()
		st, err := e.Scheduler.Submit(ctx, scheduler.Request{Prompt: []int{1, 2, 3, 4, 5, 6, 7, 8}, Params: generate.Params{MaxTokens: 4}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, res, err := st.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res != nil {
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				break
			}
		}
		cancel()
		<-done
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tiny, mini := namedModel(t, "glm52-tiny", "model"), namedModel(t, "glm52-mini", "model")
	run(tiny)
	run(mini)
	run(tiny)
	histories, _ := filepath.Glob(filepath.Join(usage, "model-*.coli_usage"))
	aside, _ := filepath.Glob(filepath.Join(usage, "*.damaged*"))
	if len(histories) != 2 || len(aside) != 0 {
		t.Fatalf("histories %v, set aside %v: want one per model and none set aside", histories, aside)
	}
	for _, h := range histories {
		if fi, err := os.Stat(h); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", h, err)
		}
	}
}
