package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/engine/synthetic"
	"github.com/spoolhq/spool/native/offheap"
)

// benchRepo generates a gen-bench model with trained-like codes and
// serves it, mapped from its files, as the default artifact.
func benchRepo(t *testing.T, layers, experts int) (fakehub.Repo, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := synthetic.Generate(context.Background(), dir, synthetic.Options{SparseLayers: layers, Experts: experts, Codes: synthetic.CodesNormal, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	repo := fakehub.Repo{ID: download.DefaultRepo, Commit: download.DefaultRevision, Branches: []string{"main"}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, err := offheap.MapFile(f) // the page cache's, not the heap's
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { offheap.Unmap(data) })
		repo.Files = append(repo.Files, fakehub.File{Path: e.Name(), Data: data, LFS: strings.HasSuffix(e.Name(), ".safetensors")})
	}
	sort.Slice(repo.Files, func(i, j int) bool { return repo.Files[i].Path < repo.Files[j].Path })
	return repo, dir
}

// spoolChild runs spool with args as a child process (this test binary).
func spoolChild(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	return cmd
}

// greedy is the tokens spool run gives for prompt on the model in dir.
func greedy(t *testing.T, dir, prompt string, stream bool) []int {
	t.Helper()
	args := []string{"run", "--model", dir, "--prompt-ids", prompt, "--max-tokens", "6", "--temperature", "0",
		"--memory", "8GiB", "--prompt-cache", "off", "--json"}
	if stream {
		args = append(args, "--stream")
	}
	out, err := spoolChild(t, nil, args...).Output()
	if err != nil {
		t.Fatalf("spool %s: %v", strings.Join(args, " "), err)
	}
	var r struct {
		TokenIDs []int `json:"token_ids"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("spool run output %q: %v", out, err)
	}
	return r.TokenIDs
}

// TestPullSurvivesKills is the drill: spool pull of a gen-bench
// model with trained-like codes from the stand-in hub, SIGKILLed at 20
// random moments across download, packing and release, then run to the
// end. It completes with no byte lost, downloads at most 1.1x the
// model's bytes, stores the model in at most 0.80 of them (du), gives the
// raw model's greedy tokens on the reference prompts, streamed and
// resident, and spool unpack gives back files whose SHA-256 are the hub's.
func TestPullSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("the drill downloads and packs a 1 GB model 21 times (-short)")
	}
	repo, raw := benchRepo(t, 2, 24)
	h := fakehub.New(repo)
	// Paced, so that 20 kills a second apart at most land before the
	// end: 4 connections of 8 MB/s take half a minute for the model.
	h.SetRate(8 << 20)
	srv := httptest.NewServer(h)
	defer srv.Close()
	home := t.TempDir()
	store := filepath.Join(home, "store")
	env := []string{"HF_ENDPOINT=" + srv.URL, "HF_HOME=" + home, "HF_HUB_CACHE=" + filepath.Join(home, "hub"), "HF_TOKEN=",
		"HF_HUB_OFFLINE=", pull.StoreEnv + "=" + store}
	args := []string{"pull", "--json", "--connections", "4", "--chunk-size", "4194304", "--checkpoint-bytes", "262144"}
	rng := rand.New(rand.NewPCG(36, uint64(time.Now().UnixNano())))
	logf := filepath.Join(home, "pull.log")
	kills := 0
	for kills < 20 {
		log, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd := spoolChild(t, env, args...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// A random moment of the next second: the start (planning,
		// verifying what is on disk), the download, the packing or the
		// release of a shard.
		select {
		case <-time.After(time.Duration(rng.Int64N(int64(time.Second)))):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		case err := <-done:
			log.Close()
			b, _ := os.ReadFile(logf)
			if err != nil {
				t.Fatalf("pull after %d kills: %v\n%s", kills, err, b)
			}
			t.Fatalf("the pull finished after %d kills; the drill needs 20 kills first (is the hub paced?)\n%s", kills, b)
		}
		log.Close()
	}
	h.SetRate(0)
	if out, err := spoolChild(t, env, args...).CombinedOutput(); err != nil {
		t.Fatalf("the last pull: %v\n%s", err, out)
	}

	var served, size int64
	for _, s := range h.Served() {
		served += s.Bytes
	}
	size = repo.Size()
	t.Logf("%d kills; served %d bytes for a %d byte model (%.3fx)", kills, served, size, float64(served)/float64(size))
	if served > size*11/10 {
		t.Errorf("served %d bytes for a %d byte model: %.3fx, more than 1.1x", served, size, float64(served)/float64(size))
	}
	dir := pull.ModelDir(store, repo.ID, repo.Commit)
	rec, err := packed.ReadRecord(dir)
	if err != nil || rec == nil || rec.Ready(dir) != nil {
		t.Fatalf("record %+v: %v", rec, err)
	}
	disk, err := packed.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored in %d bytes: %.3f of the download", disk, float64(disk)/float64(size))
	if disk > size*80/100 {
		t.Errorf("the model takes %d bytes on disk, %.3f of the %d downloaded (want at most 0.80)", disk, float64(disk)/float64(size), size)
	}
	for _, prompt := range []string{"5,17,99,300,41,7,1000,12", "1,2,3"} {
		want := greedy(t, raw, prompt, true)
		for _, stream := range []bool{true, false} {
			if got := greedy(t, dir, prompt, stream); !slices.Equal(got, want) {
				t.Errorf("prompt %s, streamed %v: %v, the raw model's %v", prompt, stream, got, want)
			}
		}
	}
	if out, err := spoolChild(t, env, "unpack", "--model", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v\n%s", err, out)
	}
	for _, f := range repo.Files {
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); f.LFS && hex.EncodeToString(s[:]) != f.SHA256() {
			t.Errorf("%s: SHA-256 after unpacking is not the hub's", f.Path)
		}
	}
}
