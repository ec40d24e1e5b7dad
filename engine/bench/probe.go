package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/speed"
)

// probeRounds is how many disk probes bench probe takes the median of.
const probeRounds = 3

// SpeedProbe is spool bench probe: it measures the disk with decode's read pool on dir's experts
// (the working bank the plan gives, so the pool's own depth) and the
// kernels on every thread.
func SpeedProbe(ctx context.Context, dir string, mem *host.Memory, probeBytes int64, seconds float64) (speed.Probes, error) {
	cfg, w, err := host.WeightsOf(dir)
	if err != nil {
		return speed.Probes{}, err
	}
	opts, err := mem.Options()
	if err != nil {
		return speed.Probes{}, err
	}
	p, err := plan.New(cfg, w, opts)
	if err != nil {
		return speed.Probes{}, err
	}
	if err := p.Err(); err != nil {
		return speed.Probes{}, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return speed.Probes{}, err
	}
	defer c.Close()
	src, err := experts.NewStreamed(ctx, c, cfg, model.ExpertLayers(cfg, false), experts.StreamOptions{WorkingSlots: p.WorkingSlots})
	if err != nil {
		return speed.Probes{}, err
	}
	// Three rounds, the median: one round on a busy machine can meet a
	// burst of someone else's I/O or a page-cache write-back.
	var rounds [probeRounds]experts.ReadProbe
	seed := uint64(time.Now().UnixNano())
	for i := range rounds {
		if rounds[i], err = src.ProbeReads(ctx, max(probeBytes/probeRounds, 1), seed+uint64(i)); err != nil {
			src.Close()
			return speed.Probes{}, fmt.Errorf("disk probe: %w", err)
		}
	}
	src.Close()
	slices.SortFunc(rounds[:], func(a, b experts.ReadProbe) int { return cmp.Compare(a.BytesPerSecond, b.BytesPerSecond) })
	disk := rounds[probeRounds/2]
	k, err := Kernels(ctx, KernelOptions{Seconds: seconds})
	if err != nil {
		return speed.Probes{}, fmt.Errorf("kernel probe: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return speed.Probes{
		Version:                  speed.ProbesVersion,
		MeasuredAt:               time.Now().UTC(),
		Machine:                  fmt.Sprintf("%s/%s %s", runtime.GOOS, k.GOARCH, k.CPUFeatures),
		Threads:                  k.Threads,
		DiskBytesPerSecond:       disk.BytesPerSecond,
		DiskQueueDepth:           disk.Workers,
		DiskDirect:               disk.Direct,
		DiskPath:                 abs,
		KernelBytesPerSecond:     k.Int4RowMatVecBytesPerS,
		MatMul8BytesPerSecond:    k.Int4G64MatMul8BytesPerS,
		MemoryReadBytesPerSecond: k.MemoryReadBytesPerS,
	}, nil
}
