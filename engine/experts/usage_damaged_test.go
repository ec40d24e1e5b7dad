package experts_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestDamagedUsageSetAside: a usage history that does not parse (damaged,
// or another model's: other dimensions) opens the streamed tier anyway,
// with no history: the file is set aside under a name that says so, with
// its bytes, and logged; it is never overwritten with an empty history.
// A tier that used experts saves a new one in its place.
func TestDamagedUsageSetAside(t *testing.T) {
	const model = "glm52-tiny"
	ref := residentRef(t, model)
	for _, tc := range []struct {
		name, body string
		generate   bool
	}{
		{"damaged", "-1 4 16\n3 2 not-a-number\n\x00\x01", false},
		{"another model's", "-1 61 256\n-2 1 3815245270\n0 1 5\n", false},
		{"damaged, then used", "garbage", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			usage := filepath.Join(dir, "model.coli_usage")
			if err := os.WriteFile(usage, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var log syncBuffer
			d, s := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
				return experts.StreamOptions{CacheBytes: 4 * set, PinnedBytes: 2 * set, WorkingSlots: 4, UsagePath: usage,
					Logger: slog.New(slog.NewTextHandler(&log, nil))}
			}, nil)
			if tc.generate {
				generateTokens(t, d, ref.prompts[0], false)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			aside, _ := filepath.Glob(usage + ".damaged*")
			if len(aside) != 1 {
				t.Fatalf("set aside: %v", aside)
			}
			if got, _ := os.ReadFile(aside[0]); !bytes.Equal(got, []byte(tc.body)) {
				t.Errorf("the set-aside history holds %q, want %q", got, tc.body)
			}
			if !strings.Contains(log.String(), aside[0]) {
				t.Errorf("the log does not name %s: %q", aside[0], log.String())
			}
			got, err := os.ReadFile(usage)
			switch {
			case !tc.generate && err == nil:
				t.Errorf("an unused tier wrote a history: %q", got)
			case tc.generate && (err != nil || len(got) == 0):
				t.Errorf("no new history after use: %q, %v", got, err)
			}
		})
	}
}

// TestEmptyUsageNeverSaved: a tier that used no expert leaves an
// existing history file as it was.
func TestEmptyUsageNeverSaved(t *testing.T) {
	usage := filepath.Join(t.TempDir(), "model.coli_usage")
	if err := os.WriteFile(usage, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := openStreamed(t, fixtures.Path(t, "glm52-tiny"), func(set int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 4, UsagePath: usage}
	}, nil)
	before, _ := os.Stat(usage)
	if err := s.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(usage)
	if err != nil || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		t.Errorf("an empty history was written over the file: %v", err)
	}
}
