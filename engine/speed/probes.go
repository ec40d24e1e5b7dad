package speed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spoolhq/spool/internal/atomicfile"
)

// ProbesVersion is the version of the probe cache file's layout.
const ProbesVersion = 1

// Probes are this machine's figures as `spool bench probe` measured them.
type Probes struct {
	Version    int       `json:"version"`
	MeasuredAt time.Time `json:"measured_at"`
	// Machine names the machine: OS, architecture, CPU features.
	Machine string `json:"machine"`
	Threads int    `json:"threads"`

	// DiskBytesPerSecond is random whole-expert reads at the read pool's
	// depth (DiskQueueDepth requests at once, direct I/O when DiskDirect)
	// from the model directory DiskPath.
	DiskBytesPerSecond float64 `json:"disk_bytes_per_second"`
	DiskQueueDepth     int     `json:"disk_queue_depth"`
	DiskDirect         bool    `json:"disk_direct"`
	DiskPath           string  `json:"disk_path"`

	// KernelBytesPerSecond is the weight bytes the int4 matrix-vector
	// kernel applies per second on Threads threads (decode's product);
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
	case !(p.DiskBytesPerSecond > 0):
		return fmt.Errorf("probe file has no disk read rate (%g)", p.DiskBytesPerSecond)
	case !(p.KernelBytesPerSecond > 0) || !(p.MatMul8BytesPerSecond > 0):
		return fmt.Errorf("probe file has no kernel rates (%g, %g)", p.KernelBytesPerSecond, p.MatMul8BytesPerSecond)
	case p.GPUFlops < 0:
		return fmt.Errorf("probe file has a negative GPU throughput (%g)", p.GPUFlops)
	}
	return nil
}

// ErrNoProbes is returned by Load when no probe file exists yet.
var ErrNoProbes = errors.New("no speed probes on this machine yet: run `spool bench probe --model DIR`")

// Load reads and validates the probe file at path.
func Load(path string) (Probes, error) {
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
