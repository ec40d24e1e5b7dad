package pull_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
	"github.com/spoolhq/spool/native/sysinfo"
)

const repoID = "acme/glm52-mini"

// repoOf is a repository holding the files of a model directory.
func repoOf(t *testing.T, dir string) fakehub.Repo {
	t.Helper()
	r := fakehub.Repo{ID: repoID, Commit: strings.Repeat("c", 40), Branches: []string{"main"}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		r.Files = append(r.Files, fakehub.File{Path: e.Name(), Data: data, LFS: strings.HasSuffix(e.Name(), ".safetensors")})
	}
	sort.Slice(r.Files, func(i, j int) bool { return r.Files[i].Path < r.Files[j].Path })
	return r
}

func options(url, store string) pull.Options {
	return pull.Options{
		Repo: repoID, Revision: "main", Client: hub.NewClient(hub.Env{Endpoint: url}), Store: store,
		Pack: packed.Options{Force: true},
		Download: download.Options{
			Connections: 4, ChunkSize: 64 << 10, CheckpointBytes: 32 << 10, StallTimeout: 5 * time.Second,
			RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, ProgressInterval: 5 * time.Millisecond,
			DiskFree: func(path string) (sysinfo.DiskSpace, error) {
				return sysinfo.DiskSpace{Path: path, Total: 1e12, Available: 5e11, Important: 5e11}, nil
			},
			KeepAwake: func(string) (func(), error) { return func() {}, nil },
			Reserve:   -1,
		},
	}
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPullPacksAsItDownloads: a pull stores every shard packed and
// released in the store (less disk than the download, the record says
// so, nothing of the download's work files left), the preflight counts
// the packed size, the model opens; unpacking gives the hub's files.
func TestPullPacksAsItDownloads(t *testing.T) {
	repo := repoOf(t, fixtures.Path(t, "glm52-mini"))
	srv := httptest.NewServer(fakehub.New(repo))
	defer srv.Close()
	store := t.TempDir()
	var mu sync.Mutex
	packs := 0
	o := options(srv.URL, store)
	o.OnEvent = func(e pull.Event) {
		if e.Kind == pull.EventPack {
			mu.Lock()
			packs++
			mu.Unlock()
		}
	}
	p, err := pull.New(o)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The model holds two shards of experts: the window of two keeps
	// both raw at once, so the preflight needs the whole download here.
	if plan.Estimate.From != "headers" || plan.Estimate.Stored >= plan.Estimate.Download || plan.Preflight.Stored > plan.Preflight.ToFetch ||
		!strings.Contains(plan.Preflight.Message, "packed as it downloads") {
		t.Errorf("estimate %+v, preflight %+v", plan.Estimate, plan.Preflight)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := plan.ModelDir
	if dir != pull.ModelDir(store, repoID, repo.Commit) {
		t.Fatalf("model in %s", dir)
	}
	rec, err := packed.ReadRecord(dir)
	if err != nil || rec == nil || rec.Ready(dir) != nil {
		t.Fatalf("record %v, %v", rec, err)
	}
	released := 0
	for _, f := range rec.Files {
		if f.Stage == packed.Released {
			released++
		}
	}
	if released == 0 || packs != released {
		t.Fatalf("%d shards released, %d pack events", released, packs)
	}
	if _, err := os.Stat(filepath.Join(dir, ".spool-download")); !os.IsNotExist(err) {
		t.Errorf("the download's work directory stays: %v", err)
	}
	disk, _ := packed.DiskUsage(dir)
	if disk >= repo.Size() {
		t.Errorf("the model takes %d bytes on disk, the download %d", disk, repo.Size())
	}
	if _, err := packed.Unpack(context.Background(), dir, packed.UnpackOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range repo.Files {
		if got := sha(t, filepath.Join(dir, f.Path)); f.LFS && got != f.SHA256() {
			t.Errorf("%s: SHA-256 %s after unpacking, the hub's %s", f.Path, got, f.SHA256())
		}
	}
}

// TestRepairFlippedByte: a byte flipped in a pack record on disk fails the
// record's checks; the Repairer rebuilds it from the hub's bytes (Range
// requests of the expert alone), and the model gives the original's
// tokens, streamed from the repaired pack. Offline, the error names the
// expert and says a repair comes when online.
func TestRepairFlippedByte(t *testing.T) {
	src := fixtures.Path(t, "glm52-mini")
	repo := repoOf(t, src)
	h := fakehub.New(repo)
	srv := httptest.NewServer(h)
	defer srv.Close()
	p, err := pull.New(options(srv.URL, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := p.ModelDir()
	want := greedy(t, src)
	pack := filepath.Join(dir, "out-00001.safetensors"+expertpack.Suffix)
	x, err := expertpack.ReadIndex(pack)
	if err != nil {
		t.Fatal(err)
	}
	e := x.Entries[len(x.Entries)/2]
	flip(t, pack, e.Offset+e.Length/2)
	if got, err := tryGreedy(dir); err == nil && slices.Equal(got, want) {
		t.Fatal("the damaged record went unnoticed")
	}

	// Offline: the expert is named, and nothing changes.
	h2 := httptest.NewServer(http.NotFoundHandler())
	h2.Close()
	res, err := pull.RepairModel(context.Background(), dir, hub.NewClient(hub.Env{Endpoint: h2.URL}), nil)
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, pull.ErrOffline) || res[0].Layer != e.Layer || res[0].Expert != e.Expert {
		t.Fatalf("offline repair: %+v, %v", res, err)
	}

	h.Reset()
	res, err = pull.RepairModel(context.Background(), dir, hub.NewClient(hub.Env{Endpoint: srv.URL}), nil)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	var served int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	c, cfg := testmodel.Open(t, dir)
	loc, err := c.Expert(e.Layer, e.Expert, cfg)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if served != loc.Bytes() {
		t.Errorf("the repair fetched %d bytes; the expert has %d", served, loc.Bytes())
	}
	if got := greedy(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after the repair: %v, want %v", got, want)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// greedy is the greedy tokens of a fixed prompt on the model in dir,
// streamed from its packs.
func greedy(t *testing.T, dir string) []int {
	t.Helper()
	got, err := tryGreedy(dir)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func tryGreedy(dir string) ([]int, error) {
	d, err := loader.Open(context.Background(), dir, loader.Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{WorkingSlots: 8, Packs: experts.PacksRead,
				Logger: slog.New(slog.DiscardHandler)})
		},
	})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	m := d.Model
	res, err := generate.Generate(context.Background(), m, m.NewSequence(0), []int{5, 17, 99, 3, 41, 7}, generate.Params{MaxTokens: 8}, nil)
	if err != nil {
		return nil, err
	}
	return res.Tokens, nil
}

// TestRepairWhileReading: the streamed tier meets a record damaged on disk
// (a flipped byte), hands it to the model's Repairer, which rebuilds it
// from the stand-in hub (the expert's bytes alone), and the answer has the
// original's tokens; the record on disk is whole again.
func TestRepairWhileReading(t *testing.T) {
	src := fixtures.Path(t, "glm52-mini")
	repo := repoOf(t, src)
	h := fakehub.New(repo)
	srv := httptest.NewServer(h)
	defer srv.Close()
	p, err := pull.New(options(srv.URL, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := p.ModelDir()
	want := greedy(t, src)
	pack := filepath.Join(dir, "out-00001.safetensors"+expertpack.Suffix)
	x, err := expertpack.ReadIndex(pack)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range x.Entries { // every record: the prompt meets one
		flip(t, pack, e.Offset+e.Length/2)
	}
	h.Reset()
	var repairer *pull.Repairer
	d, err := loader.Open(context.Background(), dir, loader.Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			r, err := pull.RepairerFor(c, cfg, hub.Env{Endpoint: srv.URL})
			if err != nil || r == nil {
				return nil, fmt.Errorf("no repairer: %v", err)
			}
			repairer = r
			return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{WorkingSlots: 8, Packs: experts.PacksRead,
				Repairer: r, Logger: slog.New(slog.DiscardHandler)})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := generate.Generate(context.Background(), d.Model, d.Model.NewSequence(0), []int{5, 17, 99, 3, 41, 7}, generate.Params{MaxTokens: 8}, nil)
	if err != nil || !slices.Equal(res.Tokens, want) {
		t.Fatalf("with damaged records: %v (%v), want %v", res.Tokens, err, want)
	}
	if repairer == nil || len(h.Served()) == 0 {
		t.Fatal("nothing was fetched from the hub")
	}
	res2, err := pull.RepairModel(context.Background(), dir, hub.NewClient(hub.Env{Endpoint: srv.URL}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res2) >= len(x.Entries) {
		t.Errorf("the reads repaired none of the %d damaged records on disk", len(x.Entries))
	}
}

// hubSnapshot downloads repo into a Hugging Face cache and returns the
// cache and the snapshot directory.
func hubSnapshot(t *testing.T, repo fakehub.Repo, url string) (string, string) {
	t.Helper()
	cache := t.TempDir()
	o := options(url, "").Download
	o.Repo, o.Revision, o.CacheDir, o.Client = repoID, "main", cache, hub.NewClient(hub.Env{Endpoint: url})
	j, err := download.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cache, filepath.Join(cache, "models--acme--glm52-mini", "snapshots", repo.Commit)
}

// TestAdoptSnapshot: packing a Hugging Face cache's snapshot moves it into
// the store (the cache keeps nothing of it whose bytes would no longer
// match their names), where it is packed and released and unpacks to the
// hub's files; keeping the originals leaves the cache alone and puts links
// and packs in the store.
func TestAdoptSnapshot(t *testing.T) {
	repo := repoOf(t, fixtures.Path(t, "glm52-mini"))
	srv := httptest.NewServer(fakehub.New(repo))
	defer srv.Close()
	quiet := fingerprint.Options{Logger: slog.New(slog.DiscardHandler)}

	cache, snap := hubSnapshot(t, repo, srv.URL)
	store := t.TempDir()
	dir, err := pull.Adopt(snap, store, false)
	if err != nil {
		t.Fatal(err)
	}
	if dir != pull.ModelDir(store, repoID, repo.Commit) {
		t.Fatalf("adopted into %s", dir)
	}
	if _, err := os.Stat(snap); !os.IsNotExist(err) {
		t.Errorf("the snapshot stays in the cache: %v", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(cache, "models--acme--glm52-mini", "blobs"))
	if len(blobs) != 0 {
		t.Errorf("blobs left in the cache: %d", len(blobs))
	}
	if _, err := packed.Convert(context.Background(), dir, packed.Options{Release: true, Force: true}, quiet, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := packed.Unpack(context.Background(), dir, packed.UnpackOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range repo.Files {
		if got := sha(t, filepath.Join(dir, f.Path)); f.LFS && got != f.SHA256() {
			t.Errorf("%s: SHA-256 %s, the hub's %s", f.Path, got, f.SHA256())
		}
	}

	_, snap = hubSnapshot(t, repo, srv.URL)
	store = t.TempDir()
	dir, err = pull.Adopt(snap, store, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packed.Convert(context.Background(), dir, packed.Options{Force: true}, quiet, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range repo.Files {
		if got := sha(t, filepath.Join(snap, f.Path)); f.LFS && got != f.SHA256() {
			t.Errorf("%s in the cache: SHA-256 %s, the hub's %s", f.Path, got, f.SHA256())
		}
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "*"+expertpack.Suffix))
	if len(packs) == 0 {
		t.Error("no packs in the store")
	}
	if left, _ := filepath.Glob(filepath.Join(snap, "*"+expertpack.Suffix)); len(left) != 0 {
		t.Errorf("packs written into the cache: %v", left)
	}
}
