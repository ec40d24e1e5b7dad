//go:build linux

package server

import (
	"bytes"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rssKiB reads a field of /proc/self/status (VmRSS, VmHWM) in KiB.
func rssKiB(t *testing.T, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS makes VmHWM start again from the current RSS.
func resetPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}

// emptyMessagesBody is the hostile body: n empty user messages
// (100,000 make 3.3 MB).
func emptyMessagesBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"glm52-mini","max_tokens":1,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role": "user", "content": ""}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// fullProbes reports whether the probes run at the scale
// (SPOOL_PROBE_FULL=1) rather than the smaller one of make test.
func fullProbes() bool { return os.Getenv("SPOOL_PROBE_FULL") == "1" }

// TestProbeLargeBodiesMemory sends 32 and then 64 concurrent 3.3 MB bodies
// of 100,000 empty messages (8 and 16 in make test) and reports the peak
// RSS above the RSS before the burst (goal: under 1 GB). Every body must be
// refused for its context (400) or, when parsing is saturated for longer
// than the parse wait, with 503 and Retry-After. Run it alone for the
// figure:
//
//	SPOOL_PROBE_FULL=1 flock /tmp/spool-heavy.lock go test ./engine/server -run TestProbeLargeBodiesMemory -count=1 -v
func TestProbeLargeBodiesMemory(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{MaxBodyBytes: 4 << 20}})
	body := emptyMessagesBody(100_000)
	t.Logf("body: %.2f MB", float64(len(body))/1e6)
	bursts := []int{8, 16}
	if fullProbes() {
		bursts = []int{32, 64}
	}
	for _, clients := range bursts {
		base := rssKiB(t, "VmRSS")
		resetPeakRSS(t)
		start := time.Now()
		statuses := burst(t, ts.URL+"/v1/chat/completions", body, clients)
		peak := rssKiB(t, "VmHWM") - base
		time.Sleep(2 * time.Second)
		after := rssKiB(t, "VmRSS") - base
		t.Logf("PROBE large bodies: %d concurrent: peak RSS +%d MiB, +%d MiB 2 s after, %s, statuses %v",
			clients, peak>>10, after>>10, time.Since(start).Round(time.Millisecond), statuses)
		for code := range statuses {
			if code != http.StatusBadRequest && code != http.StatusServiceUnavailable {
				t.Errorf("status %d: want every body refused with 400 (context) or 503 (busy)", code)
			}
		}
		if peak > 1<<20 {
			t.Errorf("%d concurrent bodies: peak RSS grew by %d MiB, goal under 1024", clients, peak>>10)
		}
	}
}

// burst posts body from n clients at once and counts the statuses.
func burst(t *testing.T, url string, body []byte, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}, Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			code := -1
			if err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			} else {
				t.Log(err)
			}
			mu.Lock()
			statuses[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return statuses
}
