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

// probeRounds is how many rounds of each disk probe bench probe takes the
// median of; the two kinds alternate, so that both meet the same load.
const probeRounds = 5

// SpeedProbe is spool bench probe: it measures the disk with decode's read
// pool on dir's experts (the working bank the plan gives, so the pool's
// own depth and request sizes), both with the queue kept full (prefill's
// reads) and in bursts of one token's experts of a layer (decode's), and
// the CPU time the reads take; then the experts' product at the model's
// shape and the kernels on every thread. probeBytes is shared by the disk
// rounds; seconds is the time of each kernel measurement.
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
	disk, burst, err := probeDisk(ctx, src, probeBytes, w.MainExpertBytes(), p.WorkingSlots, cfg.ExpertsPerToken)
	src.Close()
	if err != nil {
		return speed.Probes{}, err
	}
	k, err := Kernels(ctx, KernelOptions{Seconds: seconds})
	if err != nil {
		return speed.Probes{}, fmt.Errorf("kernel probe: %w", err)
	}
	ex, exCPU, err := ExpertProducts(ctx, ExpertOptions{Hidden: cfg.HiddenSize, Inter: cfg.MoEIntermediateSize, Seconds: seconds / 2})
	if err != nil {
		return speed.Probes{}, fmt.Errorf("kernel probe: %w", err)
	}
	// The decode rate of packed experts on one core, the machine's
	// fastest loop, on synthetic records of trained-like codes.
	recs, err := SyntheticRecords(2, 4<<20)
	if err != nil {
		return speed.Probes{}, err
	}
	dec, err := Unpack(ctx, recs, UnpackOptions{Seconds: seconds / 2})
	if err != nil {
		return speed.Probes{}, fmt.Errorf("decode probe: %w", err)
	}
	best := dec.Loops[len(dec.Loops)-1]
	// The share of the cores the products got: on a machine shared with
	// other work the CPU time per second of wall time is below the
	// threads, and reads that cost CPU time take it from fewer cores.
	var share float64
	if exCPU > 0 {
		share = min(ex/exCPU, 1)
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
		DiskBurstBytesPerSecond:  burst.BytesPerSecond,
		DiskBurstExperts:         cfg.ExpertsPerToken,
		ReadCPUSecondsPerByte:    disk.CPUSeconds / float64(max(disk.Bytes, 1)),
		CoreShare:                share,
		KernelBytesPerSecond:     ex,
		MatMul8BytesPerSecond:    k.Int4G64MatMul8BytesPerS,
		MemoryReadBytesPerSecond: k.MemoryReadBytesPerS,
		DecodeBytesPerSecond:     best.BytesPerSecond,
		DecodeLoop:               best.Loop,
	}, nil
}

// probeDisk runs the disk probes: one untimed round that reads an expert
// into every working slot (the slabs' first touch is page faults, not
// reads), then probeRounds rounds of each kind, alternating, and returns
// the median round of each. The kept-full round's CPUSeconds is the median
// CPU time per byte of its rounds, scaled to its bytes.
func probeDisk(ctx context.Context, src *experts.Streamed, probeBytes, expertBytes int64, slots, burst int) (full, bursts experts.ReadProbe, err error) {
	seed := uint64(time.Now().UnixNano())
	if _, err := src.ProbeReads(ctx, max(int64(slots)*expertBytes, 1), seed); err != nil {
		return full, bursts, fmt.Errorf("disk probe: %w", err)
	}
	round := max(probeBytes/(2*probeRounds), 1)
	var fulls, bs [probeRounds]experts.ReadProbe
	var cpu [probeRounds]float64
	for i := range probeRounds {
		if fulls[i], err = src.ProbeReads(ctx, round, seed+uint64(2*i+1)); err != nil {
			return full, bursts, fmt.Errorf("disk probe: %w", err)
		}
		cpu[i] = fulls[i].CPUSeconds / float64(max(fulls[i].Bytes, 1))
		if bs[i], err = src.ProbeBursts(ctx, round, seed+uint64(2*i+2), burst); err != nil {
			return full, bursts, fmt.Errorf("disk probe: %w", err)
		}
	}
	byRate := func(a, b experts.ReadProbe) int { return cmp.Compare(a.BytesPerSecond, b.BytesPerSecond) }
	slices.SortFunc(fulls[:], byRate)
	slices.SortFunc(bs[:], byRate)
	slices.Sort(cpu[:])
	full, bursts = fulls[probeRounds/2], bs[probeRounds/2]
	full.CPUSeconds = cpu[probeRounds/2] * float64(full.Bytes)
	return full, bursts, nil
}
