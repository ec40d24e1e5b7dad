package experts_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// packedModel copies a fixture model and packs every one of its experts
// (forced: the fixtures' experts are too small to gain), so that every
// read of a streamed source goes through the decoder.
func packedModel(t *testing.T, model string) string {
	t.Helper()
	dir := copyModel(t, fixtures.ModelDir(t, model))
	c, cfg := testmodel.Open(t, dir)
	defer c.Close()
	res, err := expertpack.PackModel(context.Background(), c, cfg, expertpack.Options{Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range res {
		n += r.Packed
	}
	if want := len(expertpack.ExpertLayers(c, cfg)) * cfg.NumRoutedExperts; n != want {
		t.Fatalf("%d of %d experts packed", n, want)
	}
	return dir
}

// TestCorruptPack: a pack whose records are damaged never gives a panic,
// an error or wrong tokens: each damaged record is read from the shard
// instead, a note names the pack, and generation is exact (packcheck_test.go
// damages each part of a record); a pack whose shard changed is not used
// (a note says so) and generation is exact.
func TestCorruptPack(t *testing.T) {
	const model = "glm52-tiny"
	ref := residentRef(t, model)
	dir := packedModel(t, model)
	for _, sh := range []string{"out-00000.safetensors", "out-00001.safetensors"} {
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
			// Damage the first coded block of every record (past the
			// header, whose checksum would catch it first).
			if _, err := f.WriteAt([]byte{0x5a, 0xa5, 0x5a, 0xa5}, e.Offset+e.Length/2); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	d, damaged := openStreamed(t, dir, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 4, Packs: experts.PacksRead, Logger: slog.New(slog.DiscardHandler)}
	}, nil)
	for i, p := range ref.prompts {
		if got, err := tryGenerate(d, p, false); err != nil || !slices.Equal(got, ref.plain[i]) {
			t.Fatalf("damaged pack, prompt %d: %v (%v), want %v", i, got, err, ref.plain[i])
		}
	}
	if notes := damaged.PackNotes(); len(notes) == 0 || !strings.Contains(strings.Join(notes, "\n"), expertpack.Suffix+" has") {
		t.Errorf("no note names the damaged pack: %q", notes)
	}

	// A changed shard makes its pack stale: it is ignored.
	stale := packedModel(t, model)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(stale+"/out-00001.safetensors", later, later); err != nil {
		t.Fatal(err)
	}
	d2, s := openStreamed(t, stale, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 4, Packs: experts.PacksRead}
	}, nil)
	// Both packs hold bytes of out-00001 (an expert straddles the two
	// shards): both are stale.
	notes := s.PackNotes()
	for _, n := range notes {
		if !strings.Contains(n, "out-00001.safetensors changed") {
			t.Errorf("note %q does not say out-00001 changed", n)
		}
	}
	if len(notes) == 0 {
		t.Fatal("no note about the stale packs")
	}
	for i, p := range ref.prompts {
		if got := generateTokens(t, d2, p, false); !slices.Equal(got, ref.plain[i]) {
			t.Errorf("prompt %d: %v, want %v", i, got, ref.plain[i])
		}
	}
}

// TestPackPolicy: by default packs are read only where the decode loop is
// fast (a slow one is noted and the shards read instead, with the same
// tokens); PacksIgnore never reads them.
func TestPackPolicy(t *testing.T) {
	const model = "glm52-tiny"
	ref := residentRef(t, model)
	dir := packedModel(t, model)
	loops := rans.Loops()
	for _, tc := range []struct {
		name   string
		policy experts.PackPolicy
		loop   rans.Loop
		read   bool // packs read
		note   string
	}{
		{"auto, the Go loop", experts.PacksAuto, loops[0], false, "slower than the disk"},
		{"auto, the fastest loop", experts.PacksAuto, rans.Loop{}, rans.Loop{}.Fast(), map[bool]string{false: "slower than the disk"}[rans.Loop{}.Fast()]},
		{"read, the Go loop", experts.PacksRead, loops[0], true, ""},
		{"ignore", experts.PacksIgnore, rans.Loop{}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := openStreamed(t, dir, func(set int64) experts.StreamOptions {
				return experts.StreamOptions{WorkingSlots: 4, Packs: tc.policy, DecodeLoop: tc.loop}
			}, nil)
			if got := generateTokens(t, d, ref.prompts[0], false); !slices.Equal(got, ref.plain[0]) {
				t.Errorf("%v, want %v", got, ref.plain[0])
			}
			if got := s.Stats().Total.Unpacked > 0; got != tc.read {
				t.Errorf("packs read: %v, want %v", got, tc.read)
			}
			notes := s.PackNotes()
			if tc.note == "" && len(notes) > 0 {
				t.Errorf("notes %q, want none", notes)
			}
			for _, n := range notes {
				if !strings.Contains(n, tc.note) || !strings.Contains(n, tc.loop.String()) {
					t.Errorf("note %q does not say %q of %s", n, tc.note, tc.loop)
				}
			}
			if tc.note != "" && len(notes) == 0 {
				t.Error("no note says why the packs are not read")
			}
		})
	}
}
