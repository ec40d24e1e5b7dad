package bench

import (
	"context"
	"testing"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// TestUnpackReports packs a fixture model, samples its records and checks
// that every decode loop and the memcpy got a figure.
func TestUnpackReports(t *testing.T) {
	dir := fixtures.CopyModel(t, fixtures.Path(t, "glm52-tiny"))
	if recs, err := PackedRecords(dir, 4); err != nil || len(recs) != 0 {
		t.Fatalf("unpacked model: %d records, %v; want none", len(recs), err)
	}
	c, cfg := testmodel.Open(t, dir)
	// Force: the fixture's experts are too small to gain.
	if _, err := expertpack.PackModel(context.Background(), c, cfg, expertpack.Options{Force: true}, nil); err != nil {
		t.Fatal(err)
	}
	recs, err := PackedRecords(dir, 3)
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v; want 3", len(recs), err)
	}
	res, err := Unpack(context.Background(), recs, UnpackOptions{Seconds: 0.001, DiskBytesPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 3 || res.RawBytes <= 0 || res.PackedBytes <= 0 || !(res.MemcpyBytesPerSecond > 0) {
		t.Errorf("result %+v", res)
	}
	loops := rans.Loops()
	if len(res.Loops) != len(loops) {
		t.Fatalf("%d loops measured, %d run here", len(res.Loops), len(loops))
	}
	for i, l := range res.Loops {
		if l.Loop != loops[i].String() || !(l.BytesPerSecond > 0) || !(l.MemcpyRatio > 0) || !(l.DiskRatio > 0) {
			t.Errorf("loop %d: %+v", i, l)
		}
	}
	if _, err := Unpack(context.Background(), [][]byte{recs[0][:100]}, UnpackOptions{}); err == nil {
		t.Error("a cut record measured without an error")
	}
}
