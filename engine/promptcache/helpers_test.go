package promptcache

import (
	"bytes"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/kvcache"
)

// testGeo is a small geometry with every kind of state: indexer keys on
// two of three layers and an MTP layer.
var testGeo = kvcache.Geometry{Layers: 3, KVLora: 8, Rope: 4, IndexDim: 4, Indexer: []bool{true, false, true}, MTP: true}

const testHidden = 6

func testIdentity(name string) Identity {
	id := Identity{Name: name, Engine: "test", Geometry: testGeo, Hidden: testHidden}
	id.Container[0] = byte(len(name))
	copy(id.Config[:], name)
	return id
}

// value is the synthetic state of token tok at position p: a function of
// both alone, so sequences sharing a prefix share its state.
func value(p, tok, layer, j int) float32 {
	return float32(math.Sin(float64(p*131+tok*17+layer*7+j) * 0.37))
}

// fill forwards tokens into seq synthetically: every layer's rows, the
// MTP rows of positions up to len-2 (the MTP cache lags by one), and
// returns the hidden state of every position.
func fill(t testing.TB, seq *kvcache.Sequence, tokens []int) [][]float32 {
	t.Helper()
	g := seq.Geometry()
	start := seq.Len()
	if err := seq.Reserve(tokens); err != nil {
		t.Fatal(err)
	}
	all := seq.Tokens()
	W := g.KVLora + g.Rope
	hidden := make([][]float32, len(tokens))
	for i, tok := range tokens {
		p := start + i
		for l := range g.Layers {
			kv := make([]float32, W)
			for j := range kv {
				kv[j] = value(p, tok, l, j)
			}
			var idx []float32
			if g.Indexer[l] {
				idx = make([]float32, g.IndexDim)
				for j := range idx {
					idx[j] = -value(p, tok, l, 100+j)
				}
			}
			seq.Layer(l).Append(kv, idx)
		}
		hidden[i] = make([]float32, testHidden)
		for j := range hidden[i] {
			hidden[i][j] = value(p, tok, 99, j)
		}
	}
	if g.MTP {
		for p := seq.MTP().Len(); p < len(all)-1; p++ {
			kv := make([]float32, W)
			for j := range kv {
				kv[j] = value(p, all[p+1], 50, j)
			}
			seq.MTP().Append(kv, nil)
		}
	}
	return hidden
}

// filled returns a new sequence holding tokens and their hidden states.
func filled(t testing.TB, tokens []int) (*kvcache.Sequence, Hidden) {
	seq := kvcache.New(testGeo, 4096)
	return seq, Hidden{From: 0, Rows: fill(t, seq, tokens)}
}

func promptOf(n, salt int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*7 + salt*13 + 1) % 1000
	}
	return out
}

// sameState fails unless a holds exactly b's first n tokens' state (and
// MTP rows up to position n-2).
func sameState(t testing.TB, a, b *kvcache.Sequence, n int) {
	t.Helper()
	g := a.Geometry()
	if a.Len() != n || !slices.Equal(a.Tokens(), b.Tokens()[:n]) {
		t.Fatalf("sequence holds %d tokens, want the first %d", a.Len(), n)
	}
	for l := range g.Layers {
		if a.Layer(l).Len() != n || !slices.Equal(a.Layer(l).KV(0, n, nil), b.Layer(l).KV(0, n, nil)) {
			t.Fatalf("layer %d KV rows differ", l)
		}
		if g.Indexer[l] && !slices.Equal(a.Layer(l).Index(0, n, nil), b.Layer(l).Index(0, n, nil)) {
			t.Fatalf("layer %d indexer keys differ", l)
		}
	}
	if m := max(n-1, 0); a.MTP().Len() != m || !slices.Equal(a.MTP().KV(0, m, nil), b.MTP().KV(0, m, nil)) {
		t.Fatalf("MTP cache holds %d rows, want %d equal to the source's", a.MTP().Len(), m)
	}
}

// logBuffer collects log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) count(substr string) int { return strings.Count(l.String(), substr) }

func newLogger() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// blockFiles lists the block files under dir.
func blockFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, blockExt) {
			out = append(out, path)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// diskUsage sums the sizes of every regular file under dir but the lock,
// in allocation units.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockName {
			return nil
		}
		if info, err := os.Lstat(path); err == nil {
			n += allocSize(info.Size())
		}
		return nil
	})
	return n
}

func mustNew(t testing.TB, o Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
