package kernels

import (
	"testing"

	"github.com/spoolhq/spool/native/sysinfo"
)

// loopCPU runs body under b.Loop and reports the process CPU time per
// iteration as "cpu-ns/op" (when the platform has the clock): on a shared
// machine wall time counts the time other processes hold the cores, CPU time
// does not.
func loopCPU(b *testing.B, body func()) {
	b.Helper()
	c0 := sysinfo.ProcessCPUTime()
	for b.Loop() {
		body()
	}
	if c0 > 0 {
		b.ReportMetric(float64(sysinfo.ProcessCPUTime()-c0)/float64(b.N), "cpu-ns/op")
	}
}
