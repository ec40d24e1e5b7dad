package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/native/sysinfo"
)

// PackResult is what Pack measured: packing a model's experts as spool
// pull does after each shard's download, each pack written, synced and
// every record decoded back from the disk.
type PackResult struct {
	Model   string `json:"model"`
	Workers int    `json:"workers"`
	Threads int    `json:"threads"`
	// Encoder and DecodeLoop name the kernels used.
	Encoder    string `json:"encoder"`
	DecodeLoop string `json:"decode_loop"`
	Shards     int    `json:"shards"`
	Experts    int    `json:"experts"`
	// RawBytes is the experts' bytes packed, PackedBytes their records'.
	RawBytes    int64   `json:"raw_bytes"`
	PackedBytes int64   `json:"packed_bytes"`
	Ratio       float64 `json:"ratio"`
	// Seconds is the wall time of packing and verifying; CPUSeconds the
	// process's CPU time meanwhile.
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// BytesPerSecond is raw expert bytes packed per second of wall time,
	// CPUBytesPerSecond per second of CPU time (what other processes on a
	// shared machine do not inflate).
	BytesPerSecond    float64 `json:"bytes_per_second"`
	CPUBytesPerSecond float64 `json:"cpu_bytes_per_second"`
}

// Pack packs every shard of the model in dir into a temporary directory
// (the model is not changed) with workers coding at once (0: one per
// core), verifies each pack from the disk, and removes them.
func Pack(ctx context.Context, dir string, workers int) (PackResult, error) {
	res := PackResult{Model: dir, Workers: workers, Threads: runtime.GOMAXPROCS(0), Encoder: encoderName(), DecodeLoop: rans.Loop{}.String()}
	if res.Workers <= 0 {
		res.Workers = res.Threads
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return res, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return res, err
	}
	defer c.Close()
	out, err := os.MkdirTemp(dir, ".spool-bench-pack-")
	if err != nil {
		out, err = os.MkdirTemp("", "spool-bench-pack-")
	}
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(out)
	layers := expertpack.ExpertLayers(c, cfg)
	start, cpu0 := time.Now(), sysinfo.ProcessCPUTime()
	for _, sh := range c.Shards() {
		r, err := expertpack.PackShard(ctx, c, cfg, layers, sh.Name, expertpack.Options{Workers: res.Workers, Dir: out, VerifyFromDisk: true})
		if err != nil {
			return res, err
		}
		if r.Path == "" {
			continue
		}
		x, err := expertpack.ReadIndex(r.Path)
		if err != nil {
			return res, err
		}
		if _, err := expertpack.VerifyPack(ctx, c, cfg, r.Path, x, true); err != nil {
			return res, err
		}
		res.Shards++
		res.Experts += r.Packed
		res.RawBytes += r.RawBytes
		res.PackedBytes += r.PackedBytes
		os.Remove(r.Path) // the disk holds one pack at a time
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = (sysinfo.ProcessCPUTime() - cpu0).Seconds()
	if res.RawBytes == 0 {
		return res, fmt.Errorf("bench: %s has no expert worth packing", dir)
	}
	res.Ratio = float64(res.PackedBytes) / float64(res.RawBytes)
	res.BytesPerSecond = float64(res.RawBytes) / res.Seconds
	if res.CPUSeconds > 0 {
		res.CPUBytesPerSecond = float64(res.RawBytes) / res.CPUSeconds
	}
	return res, nil
}

// encoderName names the rANS encoder the kernels run.
func encoderName() string {
	if runtime.Compiler == "gc" && cgoEnabled {
		return "C (kernels/rans_encode.c)"
	}
	return "Go"
}
