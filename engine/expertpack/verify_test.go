package expertpack_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/internal/testmodel"
)

// TestVerifyModel: a fresh pack verifies whole; a flipped byte in a record
// fails it with an error that names the pack, and the count says how far
// the check got.
func TestVerifyModel(t *testing.T) {
	ctx := context.Background()
	dir := copyModel(t, "glm52-tiny")
	c, cfg := testmodel.Open(t, dir)
	if _, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Force: true}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := expertpack.VerifyModel(ctx, c, cfg, nil)
	if err != nil || len(res) == 0 {
		t.Fatalf("VerifyModel: %d results, %v", len(res), err)
	}
	for _, r := range res {
		if r.Err != nil || r.Experts == 0 {
			t.Fatalf("%s: %d experts, %v", r.Path, r.Experts, r.Err)
		}
	}

	pack := res[0].Path
	x, err := expertpack.ReadIndex(pack)
	if err != nil {
		t.Fatal(err)
	}
	last := x.Entries[len(x.Entries)-1]
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[last.Offset+last.Length/2] ^= 0x5a
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = expertpack.VerifyModel(ctx, c, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Err == nil {
		t.Fatalf("%s: a flipped byte verified", r.Path)
	}
	if !strings.Contains(r.Err.Error(), pack) || strings.Count(r.Err.Error(), pack) != 1 {
		t.Errorf("the error names the pack once: %v", r.Err)
	}
	if r.Experts != len(x.Entries)-1 {
		t.Errorf("failed after %d experts, want %d (the last record was damaged)", r.Experts, len(x.Entries)-1)
	}
	if !errors.Is(r.Err, expertpack.ErrCorrupt) && !strings.Contains(r.Err.Error(), "layer") {
		t.Errorf("the error says neither corrupt nor which expert: %v", r.Err)
	}
}
