package experts_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/internal/fixtures"
)

// releasedModel copies a fixture model and converts it in place: every
// expert packed (forced) and its raw bytes released from the shards.
func releasedModel(t *testing.T, model string) string {
	t.Helper()
	dir := copyModel(t, fixtures.ModelDir(t, model))
	if _, err := packed.Convert(context.Background(), dir, packed.Options{Release: true, Force: true},
		fingerprint.Options{Logger: slog.New(slog.DiscardHandler)}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReleasedPacks: once a model's raw experts are released, every reader
// takes them from the packs whatever the policy or decode loop (a slow
// loop or PacksIgnore would read the released ranges as zeros), with the
// reference's tokens, streamed and resident; a damaged record of a
// released pack is an error, never other tokens.
func TestReleasedPacks(t *testing.T) {
	const model = "glm52-tiny"
	ref := residentRef(t, model)
	dir := releasedModel(t, model)
	for _, tc := range []struct {
		name   string
		policy experts.PackPolicy
		loop   rans.Loop
	}{
		{"auto, the Go loop", experts.PacksAuto, rans.Loops()[0]},
		{"ignore", experts.PacksIgnore, rans.Loop{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := openStreamed(t, dir, func(row int64) experts.StreamOptions {
				return experts.StreamOptions{WorkingSlots: 4, Packs: tc.policy, DecodeLoop: tc.loop}
			}, nil)
			for i, p := range ref.prompts {
				if got := generateTokens(t, d, p, false); !slices.Equal(got, ref.plain[i]) {
					t.Fatalf("prompt %d: %v, want %v", i, got, ref.plain[i])
				}
			}
			if s.Stats().Total.Unpacked == 0 {
				t.Error("no expert was read from its pack")
			}
		})
	}
	t.Run("resident", func(t *testing.T) {
		d, err := loader.Open(context.Background(), dir, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for i, p := range ref.prompts {
			if got := generateTokens(t, d, p, false); !slices.Equal(got, ref.plain[i]) {
				t.Fatalf("prompt %d: %v, want %v", i, got, ref.plain[i])
			}
		}
		// The packed model has the original's digest (prompt caches and
		// usage histories keyed on it carry over).
		orig, err := loader.OpenHeaders(fixtures.ModelDir(t, model))
		if err != nil {
			t.Fatal(err)
		}
		defer orig.Close()
		quiet := fingerprint.Options{Logger: slog.New(slog.DiscardHandler)}
		want, err := orig.Fingerprint(context.Background(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.Fingerprint(context.Background(), quiet); err != nil || got != want {
			t.Errorf("fingerprint %v (%v), want the original's %v", got, err, want)
		}
	})
	t.Run("damaged", func(t *testing.T) {
		dir := releasedModel(t, model)
		path := dir + "/out-00001.safetensors" + expertpack.Suffix
		x, err := expertpack.ReadIndex(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range x.Entries {
			if _, err := f.WriteAt([]byte{0x5a, 0xa5, 0x5a, 0xa5}, e.Offset+e.Length/2); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		d, _ := openStreamed(t, dir, func(row int64) experts.StreamOptions {
			return experts.StreamOptions{WorkingSlots: 4, Logger: slog.New(slog.DiscardHandler)}
		}, nil)
		failed := false
		for i, p := range ref.prompts {
			got, err := tryGenerate(d, p, false)
			if err != nil {
				failed = true
				if !strings.Contains(err.Error(), "layer") {
					t.Errorf("the error does not name the expert: %v", err)
				}
				continue
			}
			if !slices.Equal(got, ref.plain[i]) {
				t.Fatalf("prompt %d: %v from a damaged pack, want %v or an error", i, got, ref.plain[i])
			}
		}
		if !failed {
			t.Error("every prompt ran on damaged records")
		}
		if _, err := loader.Open(context.Background(), dir, loader.Options{}); err == nil || !strings.Contains(err.Error(), "expert") {
			t.Errorf("resident load of damaged records: %v", err)
		}
	})
}
