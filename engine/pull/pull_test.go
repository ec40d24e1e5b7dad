package pull_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/internal/fixtures"
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
	if plan.Estimate.From != "headers" || plan.Preflight.Stored >= plan.Preflight.ToFetch || !strings.Contains(plan.Preflight.Message, "packed as it downloads") {
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
