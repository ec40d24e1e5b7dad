package experts_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/experts"
)

// syncBuffer is a log sink read after concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// damagePacks flips one byte of every record of every pack in dir, at
// the offset where picks it in the record (parsed).
func damagePacks(t *testing.T, dir string, where func(r *expertpack.Record) int64) {
	t.Helper()
	damaged := 0
	for _, sh := range []string{"out-00000.safetensors", "out-00001.safetensors", "out-mtp-00000.safetensors"} {
		path := dir + "/" + sh + expertpack.Suffix
		x, err := expertpack.ReadIndex(path)
		if err != nil {
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range x.Entries {
			rec := make([]byte, e.Length)
			if _, err := f.ReadAt(rec, e.Offset); err != nil {
				t.Fatal(err)
			}
			r, err := expertpack.ParseRecord(rec, e.Length)
			if err != nil {
				t.Fatal(err)
			}
			at := where(r)
			b := []byte{rec[at] ^ 0x40}
			if _, err := f.WriteAt(b, e.Offset+at); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
		f.Close()
	}
	if damaged == 0 {
		t.Fatal("no record damaged")
	}
}

// everyExpertUsed is a usage history that ranks every expert of every
// layer, so that pinning reads as many records as the pinned bytes hold.
func everyExpertUsed(t *testing.T, layers, nexperts int) string {
	t.Helper()
	var b strings.Builder
	for l := 0; l <= layers; l++ {
		for e := range nexperts {
			fmt.Fprintf(&b, "%d %d %d\n", l, e, 1000-e)
		}
	}
	path := t.TempDir() + "/usage.coli_usage"
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDamagedPackFallsBack: a record whose scales, coded data or header
// were damaged is caught as it is decoded (the entry's CRC-32C covers the
// rebuilt weights and the scales); the expert is read from its shard
// instead, logged and noted, and generation gives the tokens of the run
// without packs: no error, no crash, no zeros. Pinning at open, which
// reads the first records, and reading ahead fall back the same way.
func TestDamagedPackFallsBack(t *testing.T) {
	const model = "glm52-tiny"
	ref := residentRef(t, model)
	for _, tc := range []struct {
		name  string
		where func(r *expertpack.Record) int64
	}{
		{"scales", func(r *expertpack.Record) int64 { return r.ScalesOff + 3 }}, // a sign and exponent byte
		{"first coded byte", func(r *expertpack.Record) int64 { return r.DataOff }},
		{"coded data", func(r *expertpack.Record) int64 { return r.DataOff + (r.ScalesOff-r.DataOff)/2 }},
		{"header", func(r *expertpack.Record) int64 { return 20 }},
	} {
		for _, mode := range []string{"streamed", "pinned", "read ahead"} {
			pinned := mode == "pinned"
			t.Run(tc.name+", "+mode, func(t *testing.T) {
				dir := packedModel(t, model)
				damagePacks(t, dir, tc.where)
				var log syncBuffer
				cfg, err := config.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				usage := everyExpertUsed(t, cfg.NumLayers, cfg.NumRoutedExperts)
				d, s := openStreamed(t, dir, func(set int64) experts.StreamOptions {
					o := experts.StreamOptions{WorkingSlots: 4, Packs: experts.PacksRead, Logger: slog.New(slog.NewTextHandler(&log, nil))}
					switch mode {
					case "pinned":
						o.CacheBytes, o.PinnedBytes, o.UsagePath = 8*set, 8*set, usage
					case "read ahead":
						o.CacheBytes, o.WorkingSlots, o.Prefetch = 2*set, 24, true
					}
					return o
				}, nil)
				if pinned && s.Stats().Pinned == 0 {
					t.Fatal("nothing pinned")
				}
				for i, p := range ref.prompts {
					got, err := tryGenerate(d, p, false)
					if err != nil || !slices.Equal(got, ref.plain[i]) {
						t.Fatalf("prompt %d: %v (%v), without packs %v", i, got, err, ref.plain[i])
					}
				}
				if st := s.Stats(); mode == "read ahead" && st.Total.Prefetched == 0 {
					t.Errorf("nothing was read ahead: %+v", st.Total)
				}
				if !strings.Contains(log.String(), "read from the shard") || !strings.Contains(log.String(), expertpack.Suffix) {
					t.Errorf("the fallback was not logged: %q", log.String())
				}
				noted := false
				for _, n := range s.PackNotes() {
					noted = noted || strings.Contains(n, "damaged")
				}
				if !noted {
					t.Errorf("no note of the damaged records: %q", s.PackNotes())
				}
				if err := experts.CheckInvariants(s, true); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
