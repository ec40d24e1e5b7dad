package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/native/sysinfo"
)

// UnpackOptions configures Unpack.
type UnpackOptions struct {
	// Seconds is the least time spent on each measurement (0 means 0.5);
	// each decodes at least one whole record.
	Seconds float64
	// DiskBytesPerSecond, when positive, is the disk's rate reading packed
	// records (spool bench stream's probe): it gives UnpackLoop.DiskRatio.
	DiskBytesPerSecond float64
}

// UnpackLoop is one decode loop's rate on one core.
type UnpackLoop struct {
	Loop string `json:"loop"`
	// BytesPerSecond is rebuilt bytes (the experts' raw weights and
	// scales) per second of wall time; CPUBytesPerSecond per second of
	// process CPU time (zero without a CPU clock), which other processes
	// on a shared machine do not inflate.
	BytesPerSecond    float64 `json:"bytes_per_second"`
	CPUBytesPerSecond float64 `json:"cpu_bytes_per_second,omitempty"`
	// MemcpyRatio is BytesPerSecond over UnpackResult.MemcpyBytesPerSecond.
	MemcpyRatio float64 `json:"ratio_to_memcpy"`
	// DiskRatio is BytesPerSecond over the rebuilt bytes the disk delivers
	// per second (its rate times raw over packed bytes): at 1 or more, one
	// core decodes as fast as the disk reads, and decoding hides under the
	// reads of as many read workers as there are cores to spare.
	DiskRatio float64 `json:"ratio_to_disk,omitempty"`
}

// UnpackResult is what Unpack measured.
type UnpackResult struct {
	// Records is the packed experts decoded, RawBytes and PackedBytes their
	// sizes (one of each).
	Records     int   `json:"records"`
	RawBytes    int64 `json:"raw_bytes"`
	PackedBytes int64 `json:"packed_bytes"`
	// MemcpyBytesPerSecond copies the same experts' raw bytes on one core:
	// what a read of unpacked experts costs the CPU beyond the disk.
	MemcpyBytesPerSecond    float64 `json:"memcpy_bytes_per_second"`
	MemcpyCPUBytesPerSecond float64 `json:"memcpy_cpu_bytes_per_second,omitempty"`
	// Loops has every decode loop this machine runs (engine/rans.Loops),
	// the Go reference first and the one decoding uses last.
	Loops []UnpackLoop `json:"loops"`
}

// unpackRecord is one record laid out for repeated decoding: the record at
// slab offset at, past the region it rebuilds at offset 0, so that
// decoding leaves it intact (the streamed read decodes over it, block by
// block, at the same speed).
type unpackRecord struct {
	rec  *expertpack.Record
	slab []byte
	at   int64
	size int64 // record bytes
}

// Unpack measures, on one core, every decode loop rebuilding the packed
// expert records recs (whole records, each as spool pack wrote it) and a
// memcpy of the same rebuilt bytes, alternating them twice and keeping the
// best of each.
func Unpack(ctx context.Context, recs [][]byte, opts UnpackOptions) (UnpackResult, error) {
	if len(recs) == 0 {
		return UnpackResult{}, fmt.Errorf("bench: unpack: no packed records")
	}
	if opts.Seconds <= 0 {
		opts.Seconds = 0.5
	}
	res := UnpackResult{Records: len(recs)}
	var rs []unpackRecord
	var largest int64
	for i, b := range recs {
		r, err := expertpack.ParseRecord(b, int64(len(b)))
		if err != nil {
			return UnpackResult{}, fmt.Errorf("bench: unpack: record %d: %w", i, err)
		}
		at := max(r.SlabAt(1), r.RegionLen)
		slab := make([]byte, at+int64(len(b)))
		copy(slab[at:], b)
		rs = append(rs, unpackRecord{rec: r, slab: slab, at: at, size: int64(len(b))})
		res.RawBytes += r.RegionLen + r.ScalesLen
		res.PackedBytes += int64(len(b))
		largest = max(largest, r.RegionLen+r.ScalesLen)
	}
	budget := time.Duration(opts.Seconds * float64(time.Second))
	// rate runs op over the records, round robin, for the budget and
	// returns rebuilt bytes per second of wall and of CPU time.
	rate := func(op func(r *unpackRecord) error) (wall, cpu float64, err error) {
		var bytes int64
		start, cpu0 := time.Now(), sysinfo.ProcessCPUTime()
		for i := 0; ; i++ {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			r := &rs[i%len(rs)]
			if err := op(r); err != nil {
				return 0, 0, err
			}
			bytes += r.rec.RegionLen + r.rec.ScalesLen
			if el := time.Since(start); el >= budget {
				wall = float64(bytes) / el.Seconds()
				if c := sysinfo.ProcessCPUTime() - cpu0; cpu0 > 0 && c > 0 {
					cpu = float64(bytes) / c.Seconds()
				}
				return wall, cpu, nil
			}
		}
	}
	from, to := make([]byte, largest), make([]byte, largest)
	memcpy := func(r *unpackRecord) error {
		n := r.rec.RegionLen + r.rec.ScalesLen
		copy(to[:n], from[:n])
		return nil
	}
	decode := func(l rans.Loop) func(r *unpackRecord) error {
		return func(r *unpackRecord) error {
			u, err := expertpack.NewUnpacker(r.rec, r.slab, r.at)
			if err != nil {
				return err
			}
			u.UseLoop(l)
			done, err := u.Advance(r.slab, r.size)
			if err == nil && !done {
				err = fmt.Errorf("record of %d bytes not decoded", r.size)
			}
			return err // the scales stay where they landed, as in a streamed read
		}
	}
	loops := rans.Loops()
	res.Loops = make([]UnpackLoop, len(loops))
	for range 2 {
		wall, cpu, err := rate(memcpy)
		if err != nil {
			return UnpackResult{}, fmt.Errorf("bench: unpack: %w", err)
		}
		res.MemcpyBytesPerSecond = max(res.MemcpyBytesPerSecond, wall)
		res.MemcpyCPUBytesPerSecond = max(res.MemcpyCPUBytesPerSecond, cpu)
		for i, l := range loops {
			wall, cpu, err := rate(decode(l))
			if err != nil {
				return UnpackResult{}, fmt.Errorf("bench: unpack: %s: %w", l, err)
			}
			res.Loops[i].Loop = l.String()
			res.Loops[i].BytesPerSecond = max(res.Loops[i].BytesPerSecond, wall)
			res.Loops[i].CPUBytesPerSecond = max(res.Loops[i].CPUBytesPerSecond, cpu)
		}
	}
	for i := range res.Loops {
		res.Loops[i].MemcpyRatio = res.Loops[i].BytesPerSecond / res.MemcpyBytesPerSecond
		if opts.DiskBytesPerSecond > 0 {
			rebuilt := opts.DiskBytesPerSecond * float64(res.RawBytes) / float64(res.PackedBytes)
			res.Loops[i].DiskRatio = res.Loops[i].BytesPerSecond / rebuilt
		}
	}
	return res, nil
}

// PackedRecords reads up to n packed expert records of the model in dir
// (spool pack's), spread evenly over the entries of its current packs; it
// returns none when the model has no current pack.
func PackedRecords(dir string, n int) ([][]byte, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+expertpack.Suffix))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	type pick struct {
		path string
		ent  expertpack.Entry
	}
	var all []pick
	for _, path := range paths {
		x, err := expertpack.ReadIndex(path)
		if err != nil || x.Check(dir) != nil {
			continue // stale or unreadable: decoding does not use it either
		}
		for _, e := range x.Entries {
			all = append(all, pick{path, e})
		}
	}
	if len(all) == 0 || n <= 0 {
		return nil, nil
	}
	var recs [][]byte
	for i := range min(n, len(all)) {
		p := all[i*len(all)/min(n, len(all))]
		b, err := readAt(p.path, p.ent.Offset, p.ent.Length)
		if err != nil {
			return nil, err
		}
		recs = append(recs, b)
	}
	return slices.Clip(recs), nil
}

func readAt(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("bench: reading %s at %d: %w", path, off, err)
	}
	return b, nil
}

// SyntheticRecords packs n experts' worth of int4 codes with the
// statistics of normal weights quantized per row (GLM-5.2's and
// gen-bench's --codes normal), each regionBytes long in three matrices:
// what a machine's decode rate is measured on when no model's packs are
// at hand (spool bench probe).
func SyntheticRecords(n int, regionBytes int64) ([][]byte, error) {
	// The codes' frequencies in 128ths, by nibble (0 and 8 the extremes
	// folded in as the quantizer makes them).
	freq := [16]int{0, 1, 1, 1, 3, 7, 15, 23, 26, 23, 15, 7, 3, 1, 1, 1}
	var pick []byte
	for s, f := range freq {
		for range f {
			pick = append(pick, byte(s))
		}
	}
	rng := rand.New(rand.NewPCG(36, 36))
	third := regionBytes / 3
	var out [][]byte
	for range n {
		region := make([]byte, 3*third)
		for i := range region {
			region[i] = pick[rng.IntN(len(pick))] | pick[rng.IntN(len(pick))]<<4
		}
		rec, err := expertpack.BuildRecord(region, []int64{third, third, third}, make([]byte, 4096), false)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		out = append(out, rec)
	}
	return out, nil
}
