package synthetic

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
)

func TestLoudExperts(t *testing.T) {
	for _, tc := range []struct {
		e, k   int
		accept float64
		want   int
	}{
		{256, 8, 1, 0},
		{256, 8, 0, 256},
		{64, 8, 0.5, 5},  // 64 (1 - 0.5^(1/8)) = 5.3
		{256, 8, 0.9, 3}, // 256 (1 - 0.9^(1/8)) = 3.4
		{8, 8, 0.5, 1},   // 8 (1 - 0.917) = 0.67
		{8, 8, 0.999, 0}, // 0.001
	} {
		if got := loudExperts(tc.e, tc.k, tc.accept); got != tc.want {
			t.Errorf("loudExperts(%d, %d, %g) = %d, want %d", tc.e, tc.k, tc.accept, got, tc.want)
		}
	}
}

// TestEyeAndBigramRows: eh_proj's identity rows land at their own column
// whatever chunk they are written in, and the lm_head's bigram rows copy
// the embedding's codes over the random ones.
func TestEyeAndBigramRows(t *testing.T) {
	const rows, cols = 5, 10
	whole := make([]byte, rows*cols)
	fillEyeRows(whole, cols, 0)
	for r := range rows {
		for c := range cols {
			want := byte(0)
			if r == c {
				want = 127
			}
			if whole[r*cols+c] != want {
				t.Fatalf("row %d col %d = %d", r, c, whole[r*cols+c])
			}
		}
	}
	tail := make([]byte, 2*cols)
	fillEyeRows(tail, cols, 3)
	if !bytes.Equal(tail, whole[3*cols:]) {
		t.Errorf("rows 3-4 written alone %v, want %v", tail, whole[3*cols:])
	}

	b := &bigramRows{src: []int32{-1, 2, -1, 0}, embed: []byte{10, 11, 20, 21, 30, 31, 40, 41}, cols: 2}
	chunk := []byte{1, 1, 2, 2, 3, 3}
	b.fill(chunk, 1) // rows 1..3
	if want := []byte{30, 31, 2, 2, 10, 11}; !bytes.Equal(chunk, want) {
		t.Errorf("bigram rows %v, want %v", chunk, want)
	}
}

// TestBenchMTPAcceptance writes two bench models with MTP layers, one
// whose drafts are always accepted and one whose drafts never are, and
// decodes each with a draft every step: the main model's tokens are the
// same (the seeded cycle, a new token every step) and the acceptance is
// what was asked for. The routed experts are holes but the loud ones
// (what decides a draft is the embedding, the lm_head and the loud
// experts), so the test writes 300 MB, not 1.3 GB.
func TestBenchMTPAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and decodes two bench models (-short)")
	}
	ctx := context.Background()
	prompt := []int{5, 77, 300, 1000}
	const tokens = 16
	var first []int
	for _, tc := range []struct {
		accept float64
		lo, hi float64 // the acceptance measured
	}{
		{1, 0.9, 1},
		{0, 0, 0.1},
	} {
		dir := filepath.Join(t.TempDir(), "m")
		if _, err := Generate(ctx, dir, Options{SparseLayers: 1, Experts: 8, MTP: true, MTPAcceptance: tc.accept, Seed: 3, expertHoles: true}); err != nil {
			t.Fatal(err)
		}
		d, err := loader.Open(ctx, dir, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := d.Model
		if !m.HasMTP() {
			d.Close()
			t.Fatal("the model has no MTP layer")
		}
		res, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: tokens, Speculative: true}, nil)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := float64(res.DraftsAccepted) / float64(res.DraftsProposed)
		t.Logf("acceptance %g: tokens %v, drafts %d of %d accepted", tc.accept, res.Tokens, res.DraftsAccepted, res.DraftsProposed)
		if res.DraftsProposed == 0 || got < tc.lo || got > tc.hi {
			t.Errorf("acceptance %g: drafts %d of %d accepted, want a share in [%g, %g]", tc.accept, res.DraftsAccepted, res.DraftsProposed, tc.lo, tc.hi)
		}
		distinct := slices.Compact(slices.Sorted(slices.Values(res.Tokens)))
		if len(res.Tokens) != tokens || len(distinct) != tokens {
			t.Errorf("acceptance %g: %d tokens, %d distinct; want %d new tokens (the cycle)", tc.accept, len(res.Tokens), len(distinct), tokens)
		}
		if first == nil {
			first = res.Tokens
		} else if !slices.Equal(first, res.Tokens) {
			t.Errorf("the main model's tokens depend on the MTP layer: %v and %v", first, res.Tokens)
		}
	}
}
