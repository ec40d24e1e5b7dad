package download

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/native/sysinfo"
)

const testRepoID = "acme/tiny-moe"

// testRepo is a few-MB repository with shards that span many 64 KiB pieces.
func testRepo(seed uint64) fakehub.Repo {
	return fakehub.SampleRepo(testRepoID, seed, 1<<20+12345, 700<<10, 3000)
}

// startHub serves repo from a local fake hub.
func startHub(t *testing.T, repo fakehub.Repo) (*fakehub.Hub, string) {
	t.Helper()
	h := fakehub.New(repo)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// startHubB is startHub for benchmarks.
func startHubB(b *testing.B, repo fakehub.Repo) (*fakehub.Hub, string) {
	b.Helper()
	h := fakehub.New(repo)
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return h, srv.URL
}

// plentyOfSpace reports a 1 TB volume with 500 GB free.
func plentyOfSpace(path string) (sysinfo.DiskSpace, error) {
	return sysinfo.DiskSpace{Path: path, Total: 1e12, Available: 5e11, Important: 5e11}, nil
}

// eventLog collects events from a job.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) count(kind EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (l *eventLog) messages(kind EventKind) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.events {
		if e.Kind == kind {
			b.WriteString(e.Message + "\n")
		}
	}
	return b.String()
}

func (l *eventLog) states() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s []State
	for _, e := range l.events {
		if e.Kind == EventState {
			s = append(s, e.State)
		}
	}
	return s
}

// testOptions are fast options for tests: small pieces, short retries.
func testOptions(endpoint, cacheDir string, log *eventLog) Options {
	o := Options{
		Repo:             testRepoID,
		Revision:         "main",
		CacheDir:         cacheDir,
		Client:           hub.NewClient(hub.Env{Endpoint: endpoint}),
		Connections:      4,
		ChunkSize:        64 << 10,
		CheckpointBytes:  32 << 10,
		StallTimeout:     5 * time.Second,
		RetryBase:        time.Millisecond,
		RetryMax:         5 * time.Millisecond,
		ProgressInterval: 5 * time.Millisecond,
		DiskFree:         plentyOfSpace,
		KeepAwake:        func(string) (func(), error) { return func() {}, nil },
	}
	if log != nil {
		o.OnEvent = log.add
	}
	return o
}

func newTestJob(t *testing.T, o Options) *Job {
	t.Helper()
	j, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return j
}

// checkSnapshot verifies the cache layout after a finished download: every
// file reachable through a relative snapshot link with the source bytes,
// refs/main holding the commit, no partials or resume records left.
func checkSnapshot(t *testing.T, cacheDir string, repo fakehub.Repo) {
	t.Helper()
	c := hfcache.New(cacheDir, repo.ID)
	for _, f := range repo.Files {
		p := c.SnapshotPath(repo.Commit, f.Path)
		target, err := os.Readlink(p)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if filepath.IsAbs(target) || target != hfcache.LinkTarget(f.Path, f.Etag()) {
			t.Errorf("%s links to %q, want %q", f.Path, target, hfcache.LinkTarget(f.Path, f.Etag()))
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: %d bytes differ from the source's %d", f.Path, len(got), len(f.Data))
		}
	}
	ref, err := os.ReadFile(c.RefPath("main"))
	if err != nil || string(ref) != repo.Commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, repo.Commit)
	}
	leftovers := leftoverPartials(t, cacheDir)
	if len(leftovers) > 0 {
		t.Errorf("partials left after a finished download: %v", leftovers)
	}
}

func leftoverPartials(t *testing.T, cacheDir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".incomplete") || strings.HasSuffix(p, ".spool.json")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// checkpointed reads the cache as a restarted download would credit it:
// complete blobs whole, partials by their resume records.
func checkpointed(t *testing.T, cacheDir string, repo fakehub.Repo) map[string]Ranges {
	t.Helper()
	c := hfcache.New(cacheDir, repo.ID)
	out := map[string]Ranges{}
	for _, f := range repo.Files {
		size := int64(len(f.Data))
		if c.HasBlob(f.Etag(), size) {
			out[f.Etag()] = Ranges{{0, size}}.Clip(size)
			continue
		}
		b, err := os.ReadFile(recordPath(c.IncompletePath(f.Etag())))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		done, err := parsePartial(b, f.Etag(), size)
		if err != nil {
			t.Fatalf("resume record of %s: %v", f.Path, err)
		}
		out[f.Etag()] = done
	}
	return out
}

// refetched returns the requests that asked again for checkpointed bytes.
func refetched(served map[string]fakehub.Served, before map[string]Ranges) []string {
	var bad []string
	for etag, s := range served {
		for _, r := range s.Requests {
			if n := before[etag].Overlap(Range{r.Start, r.End}); n > 0 {
				bad = append(bad, fmt.Sprintf("%s: request #%d for [%d, %d) asks for %d checkpointed bytes", r.Path, r.N, r.Start, r.End, n))
			}
		}
	}
	return bad
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// stripRange is a transport that drops Range headers, like a server or
// proxy that ignores them.
type stripRange struct{}

func (stripRange) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Range")
	return http.DefaultTransport.RoundTrip(r)
}
