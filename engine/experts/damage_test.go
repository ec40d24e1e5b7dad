package experts_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/internal/fixtures"
)

// damage overwrites n bytes in the middle of the first weight extent of
// expert (layer, e) with zeros, in place, and returns the bytes it
// replaced and where.
func damage(t *testing.T, d *loader.Dir, layer, e int, n int64) (path string, off int64, was []byte) {
	t.Helper()
	loc, err := d.Container.Expert(layer, e, d.Config)
	if err != nil {
		t.Fatal(err)
	}
	x := loc.Weights[0]
	off = x.Offset + x.Length/2
	path = filepath.Join(d.Path, x.File)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	was = make([]byte, n)
	if _, err := f.ReadAt(was, off); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(was, make([]byte, n)) {
		t.Fatalf("layer %d expert %d: the bytes at %d are zeros already", layer, e, off)
	}
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
	return path, off, was
}

func restore(t *testing.T, path string, off int64, was []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(was, off); err != nil {
		t.Fatal(err)
	}
}

// readOne leases expert e of layer alone and returns its digest or the
// lease's error.
func readOne(s *experts.Streamed, layer, e int) (string, error) {
	ctx := context.Background()
	l, err := s.Acquire(ctx, layer, []int{e})
	if err != nil {
		return "", err
	}
	defer l.Release()
	_, x, err := l.Next(ctx)
	if err != nil {
		return "", err
	}
	return digest(x), nil
}

// residentDigest is the digest of an expert read by the plain loader
// before any damage.
func residentDigest(t *testing.T, d *loader.Dir, layer, e int) string {
	t.Helper()
	x, err := loader.ExpertLoader{C: d.Container, Config: d.Config}.LoadExpert(layer, e)
	if err != nil {
		t.Fatal(err)
	}
	return digest(x)
}

// TestDamagedExpertNamed: a shard's expert payload overwritten with zeros
// after the model was opened fails the next read of that expert with a
// ReadError naming the expert and the shard (no local path), an
// ErrChecksum; an untouched expert of the same shard still reads intact;
// a forward that routes to damaged experts fails with the error, never
// with other tokens.
func TestDamagedExpertNamed(t *testing.T) {
	dir := copyModel(t, fixtures.Path(t, "glm52-tiny"))
	d, s := openChecked(t, dir, func(int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 2, Workers: 2, ReadChunk: 4096}
	}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
	want4 := residentDigest(t, d, 1, 4)
	path, _, _ := damage(t, d, 1, 3, 64)
	_, err := readOne(s, 1, 3)
	var re *experts.ReadError
	if !errors.As(err, &re) || !errors.Is(err, experts.ErrChecksum) || !re.Damaged() {
		t.Fatalf("reading the damaged expert: %v, want a checksum ReadError", err)
	}
	var ce *experts.ChecksumError
	if re.Layer != 1 || re.Expert != 3 || re.File != filepath.Base(path) || !errors.As(err, &ce) || !ce.Changed {
		t.Errorf("the error names layer %d expert %d in %q (%+v), want layer 1 expert 3 in %q, written in place", re.Layer, re.Expert, re.File, ce, filepath.Base(path))
	}
	if strings.Contains(re.Error(), dir) {
		t.Errorf("the error carries the model's local path: %v", re)
	}
	if got, err := readOne(s, 1, 4); err != nil || got != want4 {
		t.Errorf("an untouched expert of the same shard: %v, digest equal %v", err, got == want4)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}

	// Every expert of layer 2 damaged: generation fails with the damage.
	for e := range d.Config.NumRoutedExperts {
		damage(t, d, 2, e, 16)
	}
	ref := residentRef(t, "glm52-tiny")
	_, err = tryGenerate(d, ref.prompts[0], false)
	if !errors.As(err, &re) || re.Layer != 2 || !errors.Is(err, experts.ErrChecksum) {
		t.Fatalf("generating through damaged experts: %v, want a checksum ReadError of layer 2", err)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}
}

// repairer restores the bytes it was given, counting its calls.
type repairer struct {
	calls atomic.Int32
	fix   func(ctx context.Context, re *experts.ReadError) error
}

func (r *repairer) Repair(ctx context.Context, re *experts.ReadError) error {
	r.calls.Add(1)
	return r.fix(ctx, re)
}

// TestRepairSeam: with a Repairer, a damaged expert is handed to it once;
// restored, the expert is read again and delivered intact; not restored
// (or still damaged), the damage is reported after one try.
func TestRepairSeam(t *testing.T) {
	dir := copyModel(t, fixtures.Path(t, "glm52-tiny"))
	r := &repairer{}
	d, s := openChecked(t, dir, func(int64) experts.StreamOptions {
		return experts.StreamOptions{WorkingSlots: 2, Workers: 2, Repairer: r}
	}, nil)
	want := residentDigest(t, d, 1, 5)

	path, off, was := damage(t, d, 1, 5, 32)
	r.fix = func(_ context.Context, re *experts.ReadError) error {
		if re.Layer != 1 || re.Expert != 5 || !re.Damaged() {
			t.Errorf("asked to repair %+v", re)
		}
		restore(t, path, off, was)
		return nil
	}
	if got, err := readOne(s, 1, 5); err != nil || got != want {
		t.Fatalf("after the repair: %v, digest equal %v", err, got == want)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("%d repairs, want 1", n)
	}

	// A repair that restores nothing: reported after one more read.
	damage(t, d, 1, 5, 32)
	r.calls.Store(0)
	r.fix = func(context.Context, *experts.ReadError) error { return nil }
	if _, err := readOne(s, 1, 5); !errors.Is(err, experts.ErrChecksum) {
		t.Fatalf("a repair that did not restore: %v, want the checksum error", err)
	}
	// One that fails.
	failed := errors.New("the hub is out of reach")
	r.fix = func(context.Context, *experts.ReadError) error { return failed }
	if _, err := readOne(s, 1, 5); !errors.Is(err, experts.ErrChecksum) {
		t.Fatalf("a repair that failed: %v, want the checksum error", err)
	}
	if n := r.calls.Load(); n != 2 {
		t.Errorf("%d repairs, want one per damaged read", n)
	}

	// A lease given up while its expert is being repaired stops the
	// repair: Release returns once the Repairer does.
	started := make(chan struct{})
	r.fix = func(ctx context.Context, _ *experts.ReadError) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := s.Acquire(context.Background(), 1, []int{5})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-started
		cancel()
	}()
	if _, _, err := l.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting for a repair given up: %v", err)
	}
	l.Release()
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Fatal(err)
	}
}

// The checksums are taken from the fingerprint's read; a model opened
// without one has none, and its reads are checked by the shard's stamp.
func TestChecksumsFromFingerprint(t *testing.T) {
	dir := copyModel(t, fixtures.Path(t, "glm52-tiny"))
	d, err := loader.OpenHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Container.Checksums() != nil {
		t.Fatal("checksums before the fingerprint")
	}
	dc, _ := openChecked(t, dir, func(int64) experts.StreamOptions { return experts.StreamOptions{} }, nil)
	cs := dc.Container.Checksums()
	cfg := dc.Config
	layers := cfg.SparseLayers()
	for _, l := range layers {
		for e := range cfg.NumRoutedExperts {
			loc, err := dc.Container.Expert(l, e, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range append(append([]container.Extent(nil), loc.Weights...), loc.Scales...) {
				if _, _, ok := cs.Lookup(x); !ok {
					t.Fatalf("layer %d expert %d: extent %+v has no checksum", l, e, x)
				}
			}
		}
	}
}
