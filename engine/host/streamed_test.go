package host

import (
	"context"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestStreamedWith: a model loaded with StreamedWith's tier reads its
// experts through it (Streamed finds it, with the working slots asked
// for) and decodes the tokens the resident model does; a resident model
// has no tier.
func TestStreamedWith(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.DemoModel()
	decode := func(d *loader.Dir) []int {
		t.Helper()
		m := d.Model
		res, err := generate.Generate(ctx, m, m.NewSequence(0), []int{1, 2, 3, 4}, generate.Params{MaxTokens: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}

	resident, err := loader.Open(ctx, dir, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer resident.Close()
	if s := Streamed(resident); s != nil {
		t.Errorf("a resident model has a streamed tier")
	}
	want := decode(resident)

	streamed, err := loader.Open(ctx, dir, loader.Options{Experts: StreamedWith(experts.StreamOptions{CacheBytes: 4 << 20, WorkingSlots: 24})})
	if err != nil {
		t.Fatal(err)
	}
	defer streamed.Close()
	s := Streamed(streamed)
	if s == nil {
		t.Fatal("no streamed tier")
	}
	if got := decode(streamed); !slices.Equal(got, want) {
		t.Errorf("streamed tokens %v, resident %v", got, want)
	}
	if st := s.Stats(); st.WorkingSlots < 24 || st.Total.Misses == 0 {
		t.Errorf("the tier's stats %+v: want at least 24 working slots and the experts read through it", st)
	}
}
