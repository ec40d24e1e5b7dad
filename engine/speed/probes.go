package speed

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/spoolhq/spool/internal/atomicfile"
)

// ProbesVersion is the version of the probe cache file's layout. Version
// 2 added the burst read rate and the reads' CPU cost, and measures the
// kernel on expert-shaped products: a version 1 file is probed again.
const ProbesVersion = 2

// Probes are this machine's figures as `spool bench probe` measured them.
type Probes struct {
	Version    int       `json:"version"`
	MeasuredAt time.Time `json:"measured_at"`
	// Machine names the machine: OS, architecture, CPU features.
	Machine string `json:"machine"`
	Threads int    `json:"threads"`

	// DiskBytesPerSecond is random whole-expert reads at the read pool's
	// depth (DiskQueueDepth requests at once, direct I/O when DiskDirect)
	// from the model directory DiskPath, with the queue kept full: what a
	// prefill reading many experts at once streams.
	DiskBytesPerSecond float64 `json:"disk_bytes_per_second"`
	DiskQueueDepth     int     `json:"disk_queue_depth"`
	DiskDirect         bool    `json:"disk_direct"`
	DiskPath           string  `json:"disk_path"`
	// DiskBurstBytesPerSecond is the same reads in bursts of
	// DiskBurstExperts experts of one layer, each burst submitted at once
	// and landed in full before the next: a decoded token's misses of one
	// layer, with the queue starting empty and draining as it does between
	// layers.
	DiskBurstBytesPerSecond float64 `json:"disk_burst_bytes_per_second"`
	DiskBurstExperts        int     `json:"disk_burst_experts"`
	// ReadCPUSecondsPerByte is the process CPU time the reads took per
	// byte read: near zero when the device moves the bytes (direct I/O),
	// about 1 / copy rate when the kernel copies them (a memory-backed
	// file system, buffered reads), CPU time the products cannot have.
	ReadCPUSecondsPerByte float64 `json:"read_cpu_seconds_per_byte"`

	// CoreShare is the share of the Threads cores the process got while
	// probed: the expert products' rate per second of wall time over
	// their rate per second of CPU time spread over the threads (1 on an
	// idle machine; 0: not measured, taken as 1).
	CoreShare float64 `json:"core_share,omitempty"`

	// KernelBytesPerSecond is the expert weight bytes decode's product
	// applies per second on Threads threads: one row through whole
	// experts of the model's shape, three int4 products each, every
	// product on all threads (bench.ExpertProducts);
	// MatMul8BytesPerSecond the weight bytes of the 8-input product
	// (prefill's), each pass serving 8 tokens.
	KernelBytesPerSecond  float64 `json:"kernel_bytes_per_second"`
	MatMul8BytesPerSecond float64 `json:"matmul8_bytes_per_second"`
	// MemoryReadBytesPerSecond is the plain memory read rate, the
	// kernels' ceiling.
	MemoryReadBytesPerSecond float64 `json:"memory_read_bytes_per_second"`
	// GPUFlops is the GPU's measured float throughput when prefill runs
	// on a GPU, 0 when it does not.
	GPUFlops float64 `json:"gpu_flops,omitempty"`
}

// Validate refuses probes that cannot predict anything.
func (p *Probes) Validate() error {
	switch {
	case p.Version != ProbesVersion:
		return fmt.Errorf("probe file version %d, want %d (run `spool bench probe` again)", p.Version, ProbesVersion)
	case !(p.DiskBytesPerSecond > 0) || !(p.DiskBurstBytesPerSecond > 0):
		return fmt.Errorf("probe file has no disk read rates (%g, %g)", p.DiskBytesPerSecond, p.DiskBurstBytesPerSecond)
	case !(p.ReadCPUSecondsPerByte >= 0) || math.IsInf(p.ReadCPUSecondsPerByte, 0):
		return fmt.Errorf("probe file has a bad read CPU cost (%g s/byte)", p.ReadCPUSecondsPerByte)
	case p.ReadCPUSecondsPerByte > 0 && p.Threads <= 0:
		return fmt.Errorf("probe file has a read CPU cost but no threads (%d)", p.Threads)
	case !(p.CoreShare >= 0 && p.CoreShare <= 1):
		return fmt.Errorf("probe file has a core share of %g, want 0 to 1", p.CoreShare)
	case !(p.KernelBytesPerSecond > 0) || !(p.MatMul8BytesPerSecond > 0):
		return fmt.Errorf("probe file has no kernel rates (%g, %g)", p.KernelBytesPerSecond, p.MatMul8BytesPerSecond)
	case p.GPUFlops < 0:
		return fmt.Errorf("probe file has a negative GPU throughput (%g)", p.GPUFlops)
	}
	return nil
}

// Cores is the cores the process had while probed: Threads x CoreShare.
func (p *Probes) Cores() float64 {
	if p.CoreShare == 0 {
		return float64(p.Threads)
	}
	return float64(p.Threads) * p.CoreShare
}

// ErrNoProbes is returned by Load when no probe file exists yet.
var ErrNoProbes = errors.New("no speed probes on this machine yet: run `spool bench probe --model DIR`")

// Load reads and validates the probe file at path.
func Load(path string) (Probes, error) {
	atomicfile.Sweep(path) // the leftovers of saves a kill cut short
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Probes{}, ErrNoProbes
	}
	if err != nil {
		return Probes{}, fmt.Errorf("speed: %w", err)
	}
	var p Probes
	if err := json.Unmarshal(data, &p); err != nil {
		return Probes{}, fmt.Errorf("speed: %s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return Probes{}, fmt.Errorf("speed: %s: %w", path, err)
	}
	return p, nil
}

// Save writes p to path atomically (a crash leaves the old file or the
// new one, fsynced), creating the directory.
func Save(path string, p Probes) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("speed: not saving probes: %w", err)
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("speed: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("speed: saving probes: %w", err)
	}
	return nil
}
