package download

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/native/sysinfo"
)

// fullProbes reports whether the probes run at the scale
// (SPOOL_PROBE_FULL=1) rather than the smaller one of make test.
func fullProbes() bool { return os.Getenv("SPOOL_PROBE_FULL") == "1" }

func TestRevisionOutsideTheCacheIsRefused(t *testing.T) {
	_, url := startHub(t, testRepo(1))
	cache := t.TempDir()
	escape := filepath.Join(t.TempDir(), "evil_ref")
	for _, rev := range []string{"../../../../tmp/evil_ref", "../" + escape, "a/../../b", "refs/../../x"} {
		o := testOptions(url, cache, nil)
		o.Revision = rev
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "revision") {
			t.Errorf("revision %q: New gave %v, want a revision error", rev, err)
		}
	}
	if _, err := os.Stat(escape); err == nil {
		t.Fatal("a file was written outside the cache")
	}
	if _, err := (&hub.Client{Endpoint: url}).Manifest(context.Background(), testRepoID, "../x"); err == nil {
		t.Fatal("the hub client asked for a revision with ..")
	}
}

// TestProbeNoRangeServer downloads from a server that answers every Range
// request with the whole file and reports the bytes it served per byte of
// the file (goal: at most 1.2).
//
//	SPOOL_PROBE_FULL=1 flock /tmp/spool-heavy.lock go test ./engine/download -run TestProbeNoRangeServer -count=1 -v
func TestProbeNoRangeServer(t *testing.T) {
	size, chunk, conns := 8<<20, int64(256<<10), 4
	if fullProbes() {
		size, chunk, conns = 256<<20, DefaultChunkSize/4, DefaultConnections
	}
	repo := fakehub.SampleRepo(testRepoID, 77, size)
	h, url := startHub(t, repo)
	cache := t.TempDir()
	log := &eventLog{}
	o := testOptions(url, cache, log)
	o.Client.HTTP = &http.Client{Transport: stripRange{}}
	o.ChunkSize, o.CheckpointBytes, o.Connections = chunk, chunk/4, conns
	if err := newTestJob(t, o).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo)
	var served int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	ratio := float64(served) / float64(repo.Size())
	t.Logf("PROBE no-Range hub: %d-byte repository (%d pieces of %d bytes, %d connections): %d bytes served, %.3fx",
		repo.Size(), int64(size)/chunk, chunk, conns, served, ratio)
	if ratio > 1.2 {
		t.Errorf("served %.2fx the repository's bytes, goal at most 1.2x", ratio)
	}
	if !strings.Contains(log.messages(EventWarning), "ignores byte ranges") {
		t.Errorf("no warning that the server ignores ranges")
	}
}

func TestTemporaryNamesDoNotCollide(t *testing.T) {
	repo := testRepo(2)
	// Real files named like the temporary names of others.
	for _, name := range []string{"config.json.spool-link", "config.json.tmp", ".config.json.spool-link", ".config.json.spool-link-0"} {
		repo.Files = append(repo.Files, fakehub.File{Path: name, Data: []byte("real file " + name)})
	}
	_, url := startHub(t, repo)
	for i := range 20 {
		cache := t.TempDir()
		o := testOptions(url, cache, nil)
		o.Connections = 8
		if err := newTestJob(t, o).Run(context.Background()); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		checkSnapshot(t, cache, repo)
		if t.Failed() {
			t.Fatalf("run %d finished without every file", i)
		}
		// No temporary link is left beside the files.
		snap := hfcache.New(cache, repo.ID).SnapshotDir(repo.Commit)
		entries, _ := os.ReadDir(snap)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".spool-link-") && e.Name() != ".config.json.spool-link-0" {
				t.Fatalf("run %d left %s", i, e.Name())
			}
		}
	}
}

func TestSlowLinkCheckpointsByTime(t *testing.T) {
	repo := fakehub.SampleRepo(testRepoID, 9, 4<<20)
	h, url := startHub(t, repo)
	h.SetRate(256 << 10) // per connection: no piece reaches CheckpointBytes in the test
	cache := t.TempDir()
	o := testOptions(url, cache, nil)
	o.ChunkSize, o.CheckpointBytes, o.CheckpointInterval = 2<<20, 2<<20, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newTestJob(t, o).Run(ctx) }()
	// While it runs (no stop has checkpointed anything yet), the resume
	// records come to hold what an interval wrote: a part of a piece,
	// which no piece's end or CheckpointBytes would have recorded.
	var kept int64
	for kept == 0 {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before anything was checkpointed", err)
		case <-time.After(10 * time.Millisecond):
		}
		for _, r := range checkpointed(t, cache, repo) {
			kept += r.Len()
		}
	}
	cancel()
	<-done
	if kept%o.CheckpointBytes == 0 {
		t.Fatalf("the first checkpoint holds %d bytes, whole pieces: it was not made by time", kept)
	}
}

func TestWrongContentRangeFailsFast(t *testing.T) {
	repo := testRepo(3)
	h, url := startHub(t, repo)
	var mu sync.Mutex
	asked := map[string]int{} // ranged requests per blob and start
	h.SetFault(func(r fakehub.Request) fakehub.Fault {
		if r.Start > 0 {
			mu.Lock()
			asked[fmt.Sprintf("%s@%d", r.Etag, r.Start)]++
			mu.Unlock()
			return fakehub.Fault{RangeShift: 1}
		}
		return fakehub.Fault{}
	})
	o := testOptions(url, t.TempDir(), nil)
	// Retries are immediate: a retried wrong answer shows as a range asked
	// for twice, not as time.
	o.RetryBase, o.RetryMax = time.Millisecond, time.Millisecond
	err := newTestJob(t, o).Run(context.Background())
	if !errors.Is(err, hub.ErrBadContentRange) {
		t.Fatalf("Run: %v, want a Content-Range error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 {
		t.Fatal("no ranged request was made")
	}
	for k, n := range asked {
		if n > 1 {
			t.Fatalf("range %s asked for %d times: the wrong answer was retried", k, n)
		}
	}
}

func TestRedirectLoopFailsFast(t *testing.T) {
	repo := testRepo(4)
	h := fakehub.New(repo)
	var resolves atomic.Int64
	url := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/resolve/") {
			resolves.Add(1)
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	o := testOptions(url, t.TempDir(), nil)
	// Retries are immediate: a retried loop shows in the count below.
	o.RetryBase, o.RetryMax = time.Millisecond, time.Millisecond
	err := newTestJob(t, o).Run(context.Background())
	if !errors.Is(err, hub.ErrRedirectLoop) {
		t.Fatalf("Run: %v, want a redirect loop error", err)
	}
	if n := resolves.Load(); n > int64(o.Connections)*11 {
		t.Fatalf("%d resolve requests: the loop was retried", n)
	}
}

// fillingDisk reports free space that shrinks with what a job wrote.
type fillingDisk struct {
	free    int64
	written *atomic.Int64
}

func (d fillingDisk) diskFree(path string) (sysinfo.DiskSpace, error) {
	avail := max(d.free-d.written.Load(), 0)
	return sysinfo.DiskSpace{Path: path, Total: 1e12, Available: uint64(avail), Important: uint64(avail)}, nil
}

// countingStorage counts the bytes written to partials.
type countingStorage struct{ written *atomic.Int64 }

func (s countingStorage) OpenPartial(path string) (PartialFile, error) {
	f, err := OSStorage{}.OpenPartial(path)
	if err != nil {
		return nil, err
	}
	return countingFile{f, s.written}, nil
}

type countingFile struct {
	PartialFile
	written *atomic.Int64
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.PartialFile.WriteAt(p, off)
	f.written.Add(int64(n))
	return n, err
}

func TestDiskFillingUpStopsAndResumes(t *testing.T) {
	repo := fakehub.SampleRepo(testRepoID, 11, 3<<20)
	h, url := startHub(t, repo)
	h.SetRate(256 << 10)
	cache := t.TempDir()
	var written atomic.Int64
	o := testOptions(url, cache, nil)
	o.Reserve = -1
	o.CheckpointInterval = 50 * time.Millisecond
	o.Storage = countingStorage{&written}
	// Room for the download at the start, and then the volume fills up
	// (something else writes too): 1 MiB more than the guard's margin.
	o.DiskFree = fillingDisk{free: diskMargin + 1<<20, written: &written}.diskFree
	err := newTestJob(t, o).Run(context.Background())
	var df *DiskFullError
	if !errors.As(err, &df) {
		t.Fatalf("Run: %v, want a disk-full error", err)
	}
	kept := checkpointed(t, cache, repo)
	var keptBytes int64
	for _, r := range kept {
		keptBytes += r.Len()
	}
	msg := err.Error()
	var blobs int64
	for _, b := range mustPlanBlobs(t, url, t.TempDir()) {
		blobs += b
	}
	if df.Kept != keptBytes || df.Kept <= 0 || df.Left != blobs-df.Kept || strings.Contains(msg, " 0 B") {
		t.Errorf("the error says kept %d, left %d (%q); %d bytes are checkpointed of %d", df.Kept, df.Left, msg, keptBytes, blobs)
	}
	t.Log(msg)

	// With space again, the download resumes from what was kept.
	h.Reset()
	h.SetRate(0)
	o.Storage, o.DiskFree = nil, plentyOfSpace
	if err := newTestJob(t, o).Run(context.Background()); err != nil {
		t.Fatalf("Run after freeing space: %v", err)
	}
	if bad := refetched(h.Served(), kept); len(bad) > 0 {
		t.Errorf("checkpointed bytes fetched again:\n%s", strings.Join(bad, "\n"))
	}
	var served int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	if served > repo.Size()-keptBytes+int64(o.Connections)*o.ChunkSize {
		t.Errorf("the resume fetched %d bytes, %d were kept of %d", served, keptBytes, repo.Size())
	}
	checkSnapshot(t, cache, repo)
}

// TestProbeSlowLinkKills kills a download process (SIGKILL) every 2 s on a
// 4 MB/s-per-connection link, ten times, lets the eleventh run finish, and
// reports the bytes the hub served per byte of the file (goal: at most
// 1.5). With checkpoints every 16 MiB only, no connection of this link
// reaches a checkpoint before a kill, so no run would keep anything. make
// test runs a smaller version (0.5 s kills, 100 ms checkpoints).
//
//	SPOOL_PROBE_FULL=1 flock /tmp/spool-heavy.lock go test ./engine/download -run TestProbeSlowLinkKills -count=1 -v
func TestProbeSlowLinkKills(t *testing.T) {
	size, rate, killAfter, kills := 8<<20, int64(1<<20), 500*time.Millisecond, 4
	opts := fmt.Sprintf("%d,%d,%d,%d", 4<<20, 4<<20, 100, 2)
	if fullProbes() {
		size, rate, killAfter, kills = 128<<20, 4e6, 2*time.Second, 10
		opts = fmt.Sprintf("%d,%d,%d,%d", DefaultChunkSize, DefaultCheckpointBytes, DefaultCheckpointInterval.Milliseconds(), DefaultConnections)
	}
	repo := fakehub.SampleRepo(testRepoID, 21, size)
	h, url := startHub(t, repo)
	h.SetRate(rate)
	cache := t.TempDir()
	var served int64
	runs := 0
	for killed := true; killed; {
		runs++
		if runs > kills+3 {
			t.Fatalf("not done after %d runs", runs)
		}
		h.Reset()
		after := killAfter
		if runs > kills {
			after = 0
		}
		killed, _ = runChildWith(t, url, cache, false, 0, after, opts)
		for _, s := range h.Served() {
			served += s.Bytes
		}
		var kept int64
		for _, r := range checkpointed(t, cache, repo) {
			kept += r.Len()
		}
		t.Logf("run %d: killed=%v, %d bytes kept, %d served so far", runs, killed, kept, served)
	}
	checkSnapshot(t, cache, repo)
	ratio := float64(served) / float64(repo.Size())
	t.Logf("PROBE slow link kills: %d-byte repository at %d B/s per connection, %d kills every %s: %d bytes served in %d runs, %.3fx",
		repo.Size(), rate, runs-1, killAfter, served, runs, ratio)
	if ratio > 1.5 {
		t.Errorf("served %.2fx the repository's bytes across the kills, goal at most 1.5x", ratio)
	}
}
