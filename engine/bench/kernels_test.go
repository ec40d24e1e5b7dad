package bench

import (
	"context"
	"testing"

	"github.com/spoolhq/spool/native/sysinfo"
)

// TestKernelsReports runs the benchmark on a small working set for a
// moment and checks that every figure was filled in.
func TestKernelsReports(t *testing.T) {
	res, err := Kernels(context.Background(), KernelOptions{Seconds: 0.001, WorkingSet: 64 << 20, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{
		"read": res.MemoryReadBytesPerS, "copy": res.MemoryCopyBytesPerS,
		"int4-g64": res.Int4G64MatVecBytesPerS, "int4-row": res.Int4RowMatVecBytesPerS,
		"int8-row": res.Int8RowMatVecBytesPerS, "matmul8": res.Int4G64MatMul8BytesPerS,
		"ratio": res.Ratio,
	} {
		if !(v > 0) {
			t.Errorf("%s = %g, want a positive figure", name, v)
		}
	}
	if sysinfo.ProcessCPUTime() > 0 && !(res.CPURatio > 0 && res.MemoryReadCPUBytesPerS > 0 && res.Int4G64MatVecCPUBytesPerS > 0) {
		t.Errorf("CPU-time figures missing: %+v", res)
	}
	if res.Threads != 2 || res.CPUFeatures == "" || res.WorkingSetBytes < 64<<20 {
		t.Errorf("result header %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Kernels(ctx, KernelOptions{Seconds: 0.001, WorkingSet: 64 << 20}); err == nil {
		t.Error("cancelled benchmark returned no error")
	}
}

func TestExpertProducts(t *testing.T) {
	// Small experts (gate and up 64x256, down 256x64) in an 8 MiB working
	// set: many experts, each applied once a cycle.
	rate, cpu, err := ExpertProducts(context.Background(), ExpertOptions{Hidden: 256, Inter: 64, Threads: 2, Seconds: 0.001, Rounds: 3, WorkingSet: 8 << 20})
	if err != nil || !(rate > 0) {
		t.Fatalf("ExpertProducts = %g, %v; want a positive rate", rate, err)
	}
	if sysinfo.ProcessCPUTime() > 0 && !(cpu > 0) {
		t.Errorf("no CPU-time rate: %g", cpu)
	}
	// A working set smaller than one expert still holds one.
	if rate, _, err := ExpertProducts(context.Background(), ExpertOptions{Hidden: 256, Inter: 64, Seconds: 0.001, Rounds: 1, WorkingSet: 1024}); err != nil || !(rate > 0) {
		t.Errorf("one-expert working set: %g, %v", rate, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := ExpertProducts(ctx, ExpertOptions{Hidden: 256, Inter: 64, Seconds: 0.001, WorkingSet: 8 << 20}); err == nil {
		t.Error("cancelled benchmark returned no error")
	}
}
