package download

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/download/hfcache"
)

func TestDownloadFreshThenReused(t *testing.T) {
	repo := testRepo(1)
	h, url := startHub(t, repo)
	cache := t.TempDir()
	log := &eventLog{}
	j := newTestJob(t, testOptions(url, cache, log))
	plan, err := j.Plan(context.Background())
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Commit != repo.Commit || len(plan.Files) != len(repo.Files) || plan.TotalBytes != repo.Size() {
		t.Fatalf("plan: commit %s, %d files, %d bytes; want %s, %d, %d", plan.Commit, len(plan.Files), plan.TotalBytes, repo.Commit, len(repo.Files), repo.Size())
	}
	if plan.Present != 0 || plan.ToFetch != plan.BlobBytes || !plan.Preflight.OK {
		t.Fatalf("fresh plan: present %d, to fetch %d of %d, preflight %+v", plan.Present, plan.ToFetch, plan.BlobBytes, plan.Preflight)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSnapshot(t, cache, repo)
	if j.State() != StateDone {
		t.Errorf("state %s, want done", j.State())
	}
	p := j.Progress()
	if p.Done != p.Total || p.FilesDone != len(repo.Files) {
		t.Errorf("final progress %+v", p)
	}
	if got := log.count(EventFileDone); got != len(repo.Files) {
		t.Errorf("%d file-done events, want %d", got, len(repo.Files))
	}
	var served int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	if served != plan.BlobBytes {
		t.Errorf("hub served %d bytes for %d bytes of blobs", served, plan.BlobBytes)
	}

	// A second download of the same revision reuses the cache.
	h.Reset()
	j2 := newTestJob(t, testOptions(url, cache, nil))
	plan2, err := j2.Plan(context.Background())
	if err != nil {
		t.Fatalf("second Plan: %v", err)
	}
	if !plan2.Complete() || plan2.ToFetch != 0 || plan2.Preflight.Required != 0 {
		t.Errorf("second plan not complete: to fetch %d, required %d", plan2.ToFetch, plan2.Preflight.Required)
	}
	for _, f := range plan2.Files {
		if f.Status != FileComplete {
			t.Errorf("%s: status %s, want complete", f.Path, f.Status)
		}
	}
	if err := j2.Run(context.Background()); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if n := len(h.Served()); n != 0 {
		t.Errorf("second download fetched %d blobs, want none", n)
	}
	checkSnapshot(t, cache, repo)
}

func TestRunByCommitWritesNoRef(t *testing.T) {
	repo := testRepo(2)
	_, url := startHub(t, repo)
	cache := t.TempDir()
	o := testOptions(url, cache, nil)
	o.Revision = repo.Commit
	if err := newTestJob(t, o).Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if entries := leftoverPartials(t, cache); len(entries) > 0 {
		t.Errorf("leftovers: %v", entries)
	}
	j := newTestJob(t, o)
	plan, err := j.Plan(context.Background())
	if err != nil || !plan.Complete() {
		t.Fatalf("plan after download by commit: %v, complete=%v", err, plan != nil && plan.Complete())
	}
	if _, err := hfcache.New(o.CacheDir, o.Repo).ResolveRevision("main"); err == nil {
		t.Errorf("refs/main written for a download by commit")
	}
}

func TestEmptyRevisionMeansMain(t *testing.T) {
	repo := testRepo(3)
	_, url := startHub(t, repo)
	o := testOptions(url, t.TempDir(), nil)
	o.Revision = ""
	plan, err := newTestJob(t, o).Plan(context.Background())
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != "main" || plan.Commit != repo.Commit {
		t.Errorf("revision %q commit %s", plan.Revision, plan.Commit)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	good := testOptions("http://127.0.0.1:1", "/tmp/x", nil)
	tests := []struct {
		name string
		mut  func(*Options)
		want string
	}{
		{"bad repo", func(o *Options) { o.Repo = "../etc" }, "repository id"},
		{"no cache", func(o *Options) { o.CacheDir = "" }, "cache directory"},
		{"no client", func(o *Options) { o.Client = nil }, "hub client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.mut(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestRunTwiceAtOnce(t *testing.T) {
	repo := testRepo(4)
	h, url := startHub(t, repo)
	h.SetRate(256 << 10)
	o := testOptions(url, t.TempDir(), nil)
	started := make(chan struct{})
	var once bool
	o.OnEvent = func(e Event) {
		if e.Kind == EventState && e.State == StateDownloading && !once {
			once = true
			close(started)
		}
	}
	j := newTestJob(t, o)
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	<-started
	if err := j.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	j.Cancel()
	if err := <-done; !errors.Is(err, ErrCancelled) {
		t.Errorf("Run after Cancel: %v", err)
	}
}
