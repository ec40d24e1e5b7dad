package download

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestPauseResume(t *testing.T) {
	repo := testRepo(30)
	h, url := startHub(t, repo)
	h.SetRate(1 << 20)
	cache := t.TempDir()
	log := &eventLog{}
	var j *Job
	var once sync.Once
	var pausedAt int64
	o := testOptions(url, cache, nil)
	o.OnEvent = func(e Event) {
		log.add(e)
		switch {
		case e.Kind == EventProgress && e.Progress.Done > e.Progress.Total/3:
			once.Do(func() { j.Pause() })
		case e.Kind == EventState && e.State == StatePaused:
			pausedAt = e.Progress.Done
			j.Resume()
		}
	}
	j = newTestJob(t, o)
	if err := j.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSnapshot(t, cache, repo)
	want := []State{StateDownloading, StatePaused, StateDownloading, StateDone}
	if got := log.states(); !slices.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	if pausedAt <= 0 {
		t.Errorf("paused with %d bytes done", pausedAt)
	}
	// Pausing keeps bytes already written: each byte is served about once.
	var served int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	if slack := int64(o.Connections) * (512 << 10); served > repo.Size()+slack {
		t.Errorf("served %d bytes for %d (slack %d)", served, repo.Size(), slack)
	}
}

func TestPauseBeforeRunThenCancel(t *testing.T) {
	repo := testRepo(31)
	h, url := startHub(t, repo)
	log := &eventLog{}
	o := testOptions(url, t.TempDir(), nil)
	var j *Job
	o.OnEvent = func(e Event) {
		log.add(e)
		if e.Kind == EventState && e.State == StatePaused {
			j.Cancel()
		}
	}
	j = newTestJob(t, o)
	j.Pause()
	err := j.Run(context.Background())
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("Run: %v, want ErrCancelled", err)
	}
	if j.State() != StateCancelled {
		t.Errorf("state %s", j.State())
	}
	if n := len(h.Served()); n != 0 {
		t.Errorf("a job paused before it ran fetched %d blobs", n)
	}
}

func TestCancelKeepsPartials(t *testing.T) {
	repo := testRepo(32)
	h, url := startHub(t, repo)
	h.SetRate(1 << 20)
	cache := t.TempDir()
	var j *Job
	var once sync.Once
	o := testOptions(url, cache, nil)
	o.OnEvent = func(e Event) {
		if e.Kind == EventProgress && e.Progress.Done > e.Progress.Total/2 {
			once.Do(func() { j.Cancel() })
		}
	}
	j = newTestJob(t, o)
	if err := j.Run(context.Background()); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Run: %v, want ErrCancelled", err)
	}
	kept := checkpointed(t, cache, repo)
	if len(kept) == 0 {
		t.Fatal("nothing kept after Cancel")
	}
	h.Reset()
	h.SetRate(0)
	if err := newTestJob(t, testOptions(url, cache, nil)).Run(context.Background()); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if bad := refetched(h.Served(), kept); len(bad) > 0 {
		t.Errorf("checkpointed bytes fetched again: %v", bad)
	}
	checkSnapshot(t, cache, repo)
}

func TestContextCancelStops(t *testing.T) {
	repo := testRepo(33)
	h, url := startHub(t, repo)
	h.SetRate(512 << 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := testOptions(url, t.TempDir(), nil)
	var once sync.Once
	o.OnEvent = func(e Event) {
		if e.Kind == EventProgress && e.Progress.Fetched > 0 {
			once.Do(cancel)
		}
	}
	j := newTestJob(t, o)
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	if err := <-done; !errors.Is(err, ErrCancelled) {
		t.Errorf("Run: %v, want ErrCancelled", err)
	}
}
