package sysinfo

import (
	"runtime"
	"testing"
	"time"
)

func TestProcessCPUTimeAdvances(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" {
		t.Skip("no process CPU clock on this system")
	}
	c0 := ProcessCPUTime()
	if c0 <= 0 {
		t.Fatalf("process CPU time %v, want a positive figure", c0)
	}
	var sink uint64
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		sink++
	}
	if c1 := ProcessCPUTime(); c1 <= c0 {
		t.Errorf("CPU time did not advance over a busy loop: %v then %v (%d)", c0, c1, sink)
	}
}
func TestPeakRSSCoversCurrent(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" {
		t.Skip("no peak RSS on this system")
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	fs, err := Footprint()
	if err != nil {
		t.Fatal(err)
	}
	peak := PeakRSS()
	// The kernel folds each thread's page counts into the peak in batches,
	// so the peak may trail the current figure by a few pages.
	if peak+4<<20 < fs.RSS || peak < 64<<20 {
		t.Errorf("peak RSS %d is below the current RSS %d or the 64 MiB just touched (%d)", peak, fs.RSS, buf[len(buf)-1])
	}
}
