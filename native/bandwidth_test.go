package native

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMeasureSequentialRead(t *testing.T) {
	dir := t.TempDir()
	p1, _ := writeTestFile(t, dir, 5*DirectAlign+3)
	p2, _ := writeTestFile(t, dir, 2<<20)
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenDirect(p1)
	if err != nil {
		t.Fatal(err)
	}
	direct := f.Direct()
	f.Close()

	cases := []struct {
		name      string
		paths     []string
		max       int64
		block     int
		wantBytes int64
		wantFiles int
		wantBlock int
	}{
		{"all", []string{p1, empty, p2}, 0, 1 << 20, 5*DirectAlign + 3 + 2<<20, 2, 1 << 20},
		{"limited", []string{p1, p2}, 1 << 20, 1000, 1 << 20, 2, DirectAlign},
		{"first file only", []string{p1, p2}, DirectAlign, 0, DirectAlign, 1, DefaultProbeBlock},
	}
	for _, c := range cases {
		s, err := MeasureSequentialRead(context.Background(), c.paths, c.max, c.block)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Bytes != c.wantBytes || s.Files != c.wantFiles || s.BlockSize != c.wantBlock || s.Direct != direct {
			t.Errorf("%s: %+v; want %d bytes, %d files, block %d, direct %v", c.name, s, c.wantBytes, c.wantFiles, c.wantBlock, direct)
		}
		if s.Seconds <= 0 || s.BytesPerSecond <= 0 {
			t.Errorf("%s: no rate in %+v", c.name, s)
		}
	}
}

func TestMeasureSequentialReadErrors(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeTestFile(t, dir, DirectAlign)
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MeasureSequentialRead(context.Background(), nil, 0, 0); err == nil {
		t.Error("no files: no error")
	}
	if _, err := MeasureSequentialRead(context.Background(), []string{empty}, 0, 0); err == nil {
		t.Error("empty file: no error")
	}
	if _, err := MeasureSequentialRead(context.Background(), []string{filepath.Join(dir, "missing")}, 0, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureSequentialRead(ctx, []string{p}, 0, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
