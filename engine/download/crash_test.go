package download

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download/hub"
)

// Environment of the crash child: the test binary re-executed to run one
// download that the parent kills.
const (
	crashChildEnv = "SPOOL_DOWNLOAD_CRASH_CHILD"
	crashHubEnv   = "SPOOL_DOWNLOAD_CRASH_HUB"
	crashCacheEnv = "SPOOL_DOWNLOAD_CRASH_CACHE"
	// crashOptsEnv, when set, is "chunk,checkpointBytes,checkpointMs,connections".
	crashOptsEnv = "SPOOL_DOWNLOAD_CRASH_OPTS"
)

// TestCrashChild is the child side of TestCrashResume; it does nothing in a
// normal test run. It downloads testRepoID and prints "progress <done>" on
// every progress event so the parent can kill it at a chosen point.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		t.Skip("child process of TestCrashResume only")
	}
	o := testOptions(os.Getenv(crashHubEnv), os.Getenv(crashCacheEnv), nil)
	o.ProgressInterval = 2_000_000 // 2 ms
	if v := os.Getenv(crashOptsEnv); v != "" {
		var ms int64
		if _, err := fmt.Sscanf(v, "%d,%d,%d,%d", &o.ChunkSize, &o.CheckpointBytes, &ms, &o.Connections); err != nil {
			t.Fatalf("%s=%q: %v", crashOptsEnv, v, err)
		}
		o.CheckpointInterval = time.Duration(ms) * time.Millisecond
	}
	o.OnEvent = func(e Event) {
		if e.Kind == EventProgress || e.Kind == EventFileDone {
			fmt.Fprintf(os.Stdout, "progress %d\n", e.Progress.Done)
		}
	}
	j, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatalf("child download: %v", err)
	}
}

// crashStats are the figures of one crash/resume test.
type crashStats struct {
	kills, runs int
	source      int64 // bytes of distinct blobs
	served      int64 // body bytes the hub sent, all runs together
	lost        int64 // bytes sent that were not checkpointed before a kill
}

// TestCrashResume kills a downloading process with SIGKILL at random points
// (seeded) and restarts it until the download finishes. It checks that the
// final bytes equal the source and that no restart asked for a byte that was
// checkpointed (written, synced and recorded) before the kill.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary many times")
	}
	st := runCrashResume(t, 0x5eed, 20)
	t.Logf("crash/resume: %d kills, %d runs; %d source bytes, %d served (%d re-fetched: sent but not checkpointed before a kill, %.1f%%)",
		st.kills, st.runs, st.source, st.served, st.served-st.source, 100*float64(st.served-st.source)/float64(st.source))
}

func runCrashResume(t *testing.T, seed uint64, maxKills int) crashStats {
	t.Helper()
	repo := testRepo(40)
	h, url := startHub(t, repo)
	h.SetRate(2 << 20) // per connection; a full run takes about a quarter second
	cache := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 1))
	var st crashStats
	for _, b := range mustPlanBlobs(t, url, cache) {
		st.source += b
	}
	for st.runs = 1; ; st.runs++ {
		if st.runs > maxKills+5 {
			t.Fatalf("not done after %d runs", st.runs)
		}
		before := checkpointed(t, cache, repo)
		var start int64
		for _, r := range before {
			start += r.Len()
		}
		h.Reset()
		// Kill after a random share of the rest, about 1/maxKills of the
		// download on average, or while the last blobs are verified.
		kill := st.kills < maxKills
		threshold := min(start+1+rng.Int64N(2*st.source/int64(maxKills)), st.source)
		killed, done := runChild(t, url, cache, kill, threshold)
		served := h.Served()
		for _, s := range served {
			st.served += s.Bytes
		}
		if bad := refetched(served, before); len(bad) > 0 {
			t.Fatalf("run %d asked again for checkpointed bytes:\n%s", st.runs, strings.Join(bad, "\n"))
		}
		t.Logf("run %d: started with %d bytes checkpointed, killed=%v at %d bytes done", st.runs, start, killed, done)
		if killed {
			st.kills++
			continue
		}
		break
	}
	checkSnapshot(t, cache, repo)
	return st
}

func mustPlanBlobs(t *testing.T, url, cache string) []int64 {
	t.Helper()
	j := newTestJob(t, testOptions(url, cache, nil))
	plan, err := j.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, b := range plan.blobs {
		out = append(out, b.file.Size)
	}
	return out
}

// runChild runs one child download. When kill is set it sends SIGKILL as soon
// as the child reports threshold bytes done. It returns whether the child was
// killed and the last progress it reported.
func runChild(t *testing.T, url, cache string, kill bool, threshold int64) (killed bool, done int64) {
	t.Helper()
	return runChildWith(t, url, cache, kill, threshold, 0, "")
}

// runChildWith is runChild that can also kill the child killAfter after
// its start and pass it options (crashOptsEnv).
func runChildWith(t *testing.T, url, cache string, kill bool, threshold int64, killAfter time.Duration, opts string) (killed bool, done int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashHubEnv+"="+url, crashCacheEnv+"="+cache, crashOptsEnv+"="+opts)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var timedKill atomic.Bool
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() {
			timedKill.Store(true)
			cmd.Process.Kill()
		})
		defer timer.Stop()
	}
	var tail []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		n, ok := strings.CutPrefix(line, "progress ")
		if !ok {
			tail = append(tail, line)
			continue
		}
		done, _ = strconv.ParseInt(n, 10, 64)
		if kill && !killed && done >= threshold {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if killed || timedKill.Load() && err != nil {
		return true, done
	}
	if err != nil {
		t.Fatalf("child failed: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(tail, "\n"), stderr.String())
	}
	return false, done
}

var _ = hub.IsCommit
