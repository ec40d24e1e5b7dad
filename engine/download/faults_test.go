package download

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/sysinfo"
)

// TestRecoversFromFaults runs whole downloads against a hub that misbehaves
// in one way each, and checks the snapshot ends up byte-identical.
func TestRecoversFromFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault func(fakehub.Request) fakehub.Fault
		opts  func(*Options)
		check func(t *testing.T, log *eventLog, h *fakehub.Hub)
	}{
		{
			name: "connection drops mid-blob",
			fault: func(r fakehub.Request) fakehub.Fault {
				if r.N%2 == 1 && r.End-r.Start > 20000 {
					return fakehub.Fault{DropAfter: 10000}
				}
				return fakehub.Fault{}
			},
			check: func(t *testing.T, log *eventLog, h *fakehub.Hub) {
				if log.count(EventRetry) == 0 {
					t.Error("no retry after dropped connections")
				}
			},
		},
		{
			name: "5xx and 429 storm",
			fault: func(r fakehub.Request) fakehub.Fault {
				switch r.N {
				case 1:
					return fakehub.Fault{Status: 500}
				case 2:
					return fakehub.Fault{Status: 503, RetryAfter: "0"}
				case 3:
					return fakehub.Fault{Status: 429, RetryAfter: "0"}
				case 4:
					return fakehub.Fault{Status: 502}
				}
				return fakehub.Fault{}
			},
			check: func(t *testing.T, log *eventLog, h *fakehub.Hub) {
				msgs := log.messages(EventRetry)
				for _, code := range []string{"500", "503", "429", "502"} {
					if !strings.Contains(msgs, code) {
						t.Errorf("no retry event for %s in:\n%s", code, msgs)
					}
				}
			},
		},
		{
			name: "corrupt payload once",
			fault: func(r fakehub.Request) fakehub.Fault {
				return fakehub.Fault{Corrupt: r.N == 2}
			},
			check: func(t *testing.T, log *eventLog, h *fakehub.Hub) {
				if log.count(EventIntegrity) == 0 {
					t.Error("no integrity event for a corrupt payload")
				}
			},
		},
		{
			name: "stalled server",
			fault: func(r fakehub.Request) fakehub.Fault {
				return fakehub.Fault{Hang: r.N == 1}
			},
			opts: func(o *Options) { o.StallTimeout = 100 * time.Millisecond },
			check: func(t *testing.T, log *eventLog, h *fakehub.Hub) {
				if !strings.Contains(log.messages(EventRetry), "stalled") {
					t.Errorf("no stall retry in:\n%s", log.messages(EventRetry))
				}
			},
		},
		{
			name: "slow server",
			fault: func(r fakehub.Request) fakehub.Fault {
				return fakehub.Fault{BytesPerSecond: 8 << 20}
			},
		},
		{
			name: "server ignores ranges",
			fault: func(r fakehub.Request) fakehub.Fault {
				return fakehub.Fault{}
			},
			opts: func(o *Options) {
				o.Client.HTTP = &http.Client{Transport: stripRange{}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := testRepo(10)
			h, url := startHub(t, repo)
			h.SetFault(tt.fault)
			cache := t.TempDir()
			log := &eventLog{}
			o := testOptions(url, cache, log)
			if tt.opts != nil {
				tt.opts(&o)
			}
			if err := newTestJob(t, o).Run(context.Background()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkSnapshot(t, cache, repo)
			if tt.check != nil {
				tt.check(t, log, h)
			}
		})
	}
}

// TestFailsCleanly runs downloads that cannot succeed and checks the error
// and that no unverified blob was published.
func TestFailsCleanly(t *testing.T) {
	tests := []struct {
		name    string
		fault   func(fakehub.Request) fakehub.Fault
		wantIs  error
		wantMsg string
	}{
		{"persistent 500", func(fakehub.Request) fakehub.Fault { return fakehub.Fault{Status: 500} }, nil, "giving up after"},
		{"always corrupt", func(r fakehub.Request) fakehub.Fault { return fakehub.Fault{Corrupt: true} }, ErrIntegrity, "failed verification 3 times"},
		{"wrong size", func(r fakehub.Request) fakehub.Fault { return fakehub.Fault{SizeDelta: 1} }, hub.ErrSizeMismatch, "the manifest says"},
		{"file gone (404)", func(r fakehub.Request) fakehub.Fault { return fakehub.Fault{Status: 404} }, hub.ErrNotFound, "404"},
		{"forbidden (403)", func(r fakehub.Request) fakehub.Fault { return fakehub.Fault{Status: 403} }, hub.ErrGated, "403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := testRepo(11)
			h, url := startHub(t, repo)
			h.SetFault(tt.fault)
			cache := t.TempDir()
			o := testOptions(url, cache, nil)
			o.MaxRetries = 3
			j := newTestJob(t, o)
			err := j.Run(context.Background())
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v is not %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if j.State() != StateFailed {
				t.Errorf("state %s, want failed", j.State())
			}
			c := hfcache.New(cache, repo.ID)
			for _, f := range repo.Files {
				if f.LFS && c.HasBlob(f.Etag(), int64(len(f.Data))) {
					t.Errorf("%s published although every answer for it was bad", f.Path)
				}
			}
		})
	}
}

func TestHubRefusals(t *testing.T) {
	repo := testRepo(12)
	gated := testRepo(13)
	gated.ID, gated.Gated, gated.Granted = "acme/gated", true, map[string]bool{"granted": true}
	private := testRepo(14)
	private.ID, private.Private = "acme/private", true
	h := fakehub.New(repo, gated, private)
	h.AddToken("granted")
	h.AddToken("other")
	srv := newServer(t, h)
	tests := []struct {
		name, repo, rev, token string
		wantIs                 error
		wantMsg                string
	}{
		{"gated without token", "acme/gated", "main", "", hub.ErrGated, "401"},
		{"gated without access", "acme/gated", "main", "other", hub.ErrGated, "403"},
		{"gated with access", "acme/gated", "main", "granted", nil, ""},
		{"private without token", "acme/private", "main", "", hub.ErrUnauthorized, "HF_TOKEN"},
		{"private with token", "acme/private", "main", "other", nil, ""},
		{"missing repo, no token", "acme/nope", "main", "", hub.ErrUnauthorized, "repository not found"},
		{"missing repo", "acme/nope", "main", "other", hub.ErrNotFound, "404"},
		{"missing revision", testRepoID, "v9", "", hub.ErrNotFound, "revision not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(srv, t.TempDir(), nil)
			o.Repo, o.Revision = tt.repo, tt.rev
			o.Client.Token = tt.token
			j := newTestJob(t, o)
			_, err := j.Plan(context.Background())
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("Plan: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Plan: %v; want %v containing %q", err, tt.wantIs, tt.wantMsg)
			}
			if err := j.Run(context.Background()); !errors.Is(err, tt.wantIs) {
				t.Errorf("Run: %v, want %v", err, tt.wantIs)
			}
		})
	}
}

// enospcStorage fails writes with ENOSPC once limit bytes were written.
type enospcStorage struct {
	limit   int64
	written atomic.Int64
}

func (s *enospcStorage) OpenPartial(path string) (PartialFile, error) {
	f, err := OSStorage{}.OpenPartial(path)
	if err != nil {
		return nil, err
	}
	return &enospcFile{PartialFile: f, s: s}, nil
}

type enospcFile struct {
	PartialFile
	s *enospcStorage
}

func (f *enospcFile) WriteAt(p []byte, off int64) (int, error) {
	if f.s.written.Add(int64(len(p))) > f.s.limit {
		return 0, &fs.PathError{Op: "write", Path: "partial", Err: syscall.ENOSPC}
	}
	return f.PartialFile.WriteAt(p, off)
}

func TestDiskFullKeepsProgress(t *testing.T) {
	repo := testRepo(15)
	h, url := startHub(t, repo)
	cache := t.TempDir()
	o := testOptions(url, cache, nil)
	o.Storage = &enospcStorage{limit: 900 << 10}
	j := newTestJob(t, o)
	err := j.Run(context.Background())
	var df *DiskFullError
	if !errors.Is(err, ErrDiskFull) || !errors.As(err, &df) {
		t.Fatalf("Run: %v, want a disk-full error", err)
	}
	if df.Kept <= 0 || df.Left <= 0 || !strings.Contains(err.Error(), "run again to resume") {
		t.Errorf("disk-full error without figures or advice: %v", err)
	}
	kept := checkpointed(t, cache, repo)
	var keptBytes int64
	for _, r := range kept {
		keptBytes += r.Len()
	}
	if keptBytes < 512<<10 {
		t.Errorf("only %d bytes checkpointed after writing 900 KiB", keptBytes)
	}

	// With space again, the download resumes without fetching kept bytes.
	h.Reset()
	o.Storage = nil
	if err := newTestJob(t, o).Run(context.Background()); err != nil {
		t.Fatalf("Run after freeing space: %v", err)
	}
	if bad := refetched(h.Served(), kept); len(bad) > 0 {
		t.Errorf("checkpointed bytes fetched again:\n%s", strings.Join(bad, "\n"))
	}
	checkSnapshot(t, cache, repo)
}

func TestPreflight(t *testing.T) {
	repo := testRepo(16)
	size := repo.Size()
	tests := []struct {
		name           string
		avail, import_ uint64
		reserve        int64
		wantOK, purge  bool
		wantMsg        []string
	}{
		{"plenty", 1e12, 1e12, 0, true, false, []string{"enough space"}},
		{"short", 1e6, 1e6, 0, false, false, []string{"not enough free space", "2.1 GB", "1.0 MB available", "HF_HUB_CACHE"}},
		{"purgeable", 1e6, 1e11, 0, true, true, []string{"purgeable"}},
		{"short even counting purgeable", 1e6, 2e6, 0, false, false, []string{"2.0 MB counting purgeable space"}},
		{"no reserve", uint64(size), uint64(size), -1, true, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, url := startHub(t, repo)
			o := testOptions(url, t.TempDir(), nil)
			o.Reserve = tt.reserve
			o.DiskFree = func(p string) (sysinfo.DiskSpace, error) {
				return sysinfo.DiskSpace{Path: p, Total: 2e12, Available: tt.avail, Important: tt.import_}, nil
			}
			j := newTestJob(t, o)
			plan, err := j.Plan(context.Background())
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			pf := plan.Preflight
			if pf.OK != tt.wantOK || pf.Purge != tt.purge || !pf.Checked {
				t.Errorf("preflight %+v", pf)
			}
			if pf.Required != pf.ToFetch+pf.Reserve || pf.ToFetch != plan.BlobBytes {
				t.Errorf("required %d != to fetch %d + reserve %d", pf.Required, pf.ToFetch, pf.Reserve)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(pf.Message, m) {
					t.Errorf("message %q lacks %q", pf.Message, m)
				}
			}
			if tt.wantOK {
				return
			}
			err = j.Run(context.Background())
			var pe *PreflightError
			if !errors.As(err, &pe) {
				t.Fatalf("Run: %v, want *PreflightError", err)
			}
			if n := len(h.Served()); n != 0 {
				t.Errorf("%d blobs requested despite the refusal", n)
			}
		})
	}
}

func TestDiskFreeErrorDoesNotBlock(t *testing.T) {
	repo := testRepo(17)
	_, url := startHub(t, repo)
	o := testOptions(url, t.TempDir(), nil)
	o.DiskFree = func(string) (sysinfo.DiskSpace, error) { return sysinfo.DiskSpace{}, errors.New("statfs broke") }
	plan, err := newTestJob(t, o).Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Preflight.OK || plan.Preflight.Checked || !strings.Contains(plan.Preflight.Message, "statfs broke") {
		t.Errorf("preflight %+v", plan.Preflight)
	}
}

func TestLockedBlob(t *testing.T) {
	repo := testRepo(18)
	_, url := startHub(t, repo)
	cache := t.TempDir()
	c := hfcache.New(cache, repo.ID)
	unlock, err := diskio.LockFile(c.LockPath(repo.Files[0].Etag()))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	err = newTestJob(t, testOptions(url, cache, nil)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("Run with a held blob lock: %v", err)
	}
}

func TestResumesForeignPartial(t *testing.T) {
	tests := []struct {
		name      string
		corrupt   bool
		wantEvent bool
	}{
		{"valid prefix", false, false},
		{"garbage prefix", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := testRepo(19)
			h, url := startHub(t, repo)
			cache := t.TempDir()
			c := hfcache.New(cache, repo.ID)
			shard := repo.Files[len(repo.Files)-3] // the 1 MiB shard
			half := append([]byte(nil), shard.Data[:len(shard.Data)/2]...)
			if tt.corrupt {
				half[100] ^= 1
			}
			if err := os.MkdirAll(c.Dir()+"/blobs", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.IncompletePath(shard.Etag()), half, 0o644); err != nil {
				t.Fatal(err)
			}
			log := &eventLog{}
			j := newTestJob(t, testOptions(url, cache, log))
			plan, err := j.Plan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range plan.Files {
				if f.Path == shard.Path && (f.Status != FilePartial || f.Present != int64(len(half))) {
					t.Errorf("%s planned as %s with %d present, want partial with %d", f.Path, f.Status, f.Present, len(half))
				}
			}
			if err := j.Run(context.Background()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkSnapshot(t, cache, repo)
			if got := log.count(EventIntegrity) > 0; got != tt.wantEvent {
				t.Errorf("integrity event = %v, want %v", got, tt.wantEvent)
			}
			served := h.Served()[shard.Etag()]
			if !tt.corrupt && served.Bytes != int64(len(shard.Data)-len(half)) {
				t.Errorf("served %d bytes of %s, want only the missing %d", served.Bytes, shard.Path, len(shard.Data)-len(half))
			}
		})
	}
}

func TestTreeFallback(t *testing.T) {
	repo := testRepo(20)
	h, url := startHub(t, repo)
	h.OmitSiblings(true)
	h.SetTreePageSize(2)
	cache := t.TempDir()
	if err := newTestJob(t, testOptions(url, cache, nil)).Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSnapshot(t, cache, repo)
}

func TestManifestRetries(t *testing.T) {
	tests := []struct {
		name    string
		fails   int
		status  int
		wantErr bool
	}{
		{"503 then fine", 2, 503, false},
		{"429 then fine", 1, 429, false},
		{"401 is final", 1, 401, true},
		{"500 forever", 100, 500, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := testRepo(21)
			h, url := startHub(t, repo)
			h.FailAPI(tt.fails, tt.status)
			log := &eventLog{}
			o := testOptions(url, t.TempDir(), log)
			o.MaxRetries = 3
			_, err := newTestJob(t, o).Plan(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Plan: %v", err)
			}
			if !tt.wantErr && log.count(EventRetry) != tt.fails {
				t.Errorf("%d retry events, want %d", log.count(EventRetry), tt.fails)
			}
		})
	}
}
