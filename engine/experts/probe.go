package experts

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/sysinfo"
)

// ReadProbe is the disk measured with decoding's own access pattern.
type ReadProbe struct {
	// Bytes is what the file system was asked for (aligned spans under
	// direct I/O); Experts the experts read.
	Bytes   int64
	Experts int
	Seconds float64
	// BytesPerSecond is Bytes / Seconds: the most a decode that does
	// nothing but read its misses can stream.
	BytesPerSecond float64
	// Requests is the read requests issued, Workers the read pool's
	// workers (requests served at once) and QueueDepth the requests
	// allowed to wait.
	Requests, Workers, QueueDepth int
	Direct                        bool
	// CPUSeconds is the process CPU time the probe took (0 where the
	// platform has no process CPU clock): near zero when the device
	// moves the bytes (direct I/O, DMA), about Bytes / copy rate when
	// the kernel copies them (a memory-backed file system, buffered
	// reads), time decode's products then cannot have.
	CPUSeconds float64
}

// ProbeReads measures the disk the way decoding reads it: whole experts
// of the decoder layers, picked at random (seeded), read as the read
// pool's chunked direct requests into the working bank's slabs, with every
// working slot in flight at once, until maxBytes are read. No lease may be
// outstanding: the probe takes the working bank for its duration and
// leaves the cache tiers as they were.
func (s *Streamed) ProbeReads(ctx context.Context, maxBytes int64, seed uint64) (ReadProbe, error) {
	return s.probe(ctx, maxBytes, seed, 0)
}

// ProbeBursts measures the disk the way one decoded token reads a layer's
// misses: burst distinct experts of one layer (picked at random, seeded)
// submitted at once, as the read pool's chunked requests, and nothing more
// until the last of them has landed; then the next burst, until maxBytes
// are read. Unlike ProbeReads the queue drains at the end of every burst
// and starts empty at the next, as it does between a token's layers, so
// the rate counts the first request's wait and the last ones' lone
// finish. burst is capped at the working bank.
func (s *Streamed) ProbeBursts(ctx context.Context, maxBytes int64, seed uint64, burst int) (ReadProbe, error) {
	if burst <= 0 {
		return ReadProbe{}, errors.New("experts: read probe: a burst needs at least one expert")
	}
	return s.probe(ctx, maxBytes, seed, burst)
}

// probe is ProbeReads (burst 0: every working slot kept in flight) and
// ProbeBursts.
func (s *Streamed) probe(ctx context.Context, maxBytes int64, seed uint64, burst int) (ReadProbe, error) {
	if maxBytes <= 0 {
		return ReadProbe{}, errors.New("experts: read probe: byte budget must be positive")
	}
	s.mu.Lock()
	var cl *slotClass
	for _, c := range s.classes {
		if c.name == mainClass {
			cl = c
		}
	}
	// Read-aheads give their slots back first.
	s.cancelAllAheadLocked()
	for deadline := time.Now().Add(10 * time.Second); cl != nil && len(cl.free) != cl.all && s.workingInUseLocked() > 0 && time.Now().Before(deadline); {
		wake := s.freed
		s.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ReadProbe{}, ctx.Err()
		}
		s.mu.Lock()
	}
	if s.closed || cl == nil || len(cl.free) != cl.all {
		s.mu.Unlock()
		return ReadProbe{}, errors.New("experts: read probe: the source is closed, has no decoder layers, or is in use")
	}
	slots := cl.free
	cl.free = nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, sl := range slots {
			s.invalidate(sl)
		}
		cl.free = slots
		s.mu.Unlock()
	}()

	var layers []*layerCache
	for _, lc := range s.layers {
		if lc.class == cl {
			layers = append(layers, lc)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type done struct {
		slot int
		res  diskio.ReadResult
	}
	results := make(chan done, 1024)
	left := make([]int, len(slots)) // chunks in flight per slot
	p := ReadProbe{Workers: s.pool.Workers(), QueueDepth: s.pool.QueueDepth(), Direct: s.Direct()}
	var submitted int64
	inflight := 0
	var firstErr error
	start, cpu0 := time.Now(), sysinfo.ProcessCPUTime()
	// issue reads expert e of layer lc into slot i.
	issue := func(i int, lc *layerCache, e int) {
		lo := lc.layouts[e]
		cs := lo.chunks(s.opts.ReadChunk)
		left[i] = len(cs)
		p.Experts++
		for _, c := range cs {
			r := lo.reads[c.read]
			req := diskio.ReadRequest{
				File: s.files[r.file], Off: c.off, Len: c.n,
				Slab: slots[i].slab[c.at : r.at+r.room],
			}
			submitted += c.n
			inflight++
			p.Requests++
			go func() {
				ch, err := s.pool.Submit(ctx, req)
				if err != nil {
					results <- done{slot: i, res: diskio.ReadResult{Err: err}}
					return
				}
				results <- done{slot: i, res: <-ch}
			}()
		}
	}
	random := func(i int) {
		lc := layers[rng.IntN(len(layers))]
		issue(i, lc, rng.IntN(len(lc.layouts)))
	}
	// nextBurst reads burst distinct experts of one random layer, in id
	// order as a decode step's lease submits them (and so in file order).
	nextBurst := func() {
		lc := layers[rng.IntN(len(layers))]
		n := min(burst, len(slots), len(lc.layouts))
		ids := rng.Perm(len(lc.layouts))[:n]
		slices.Sort(ids)
		for i, e := range ids {
			issue(i, lc, e)
		}
	}
	if burst > 0 {
		nextBurst()
	} else {
		for i := range slots {
			random(i)
		}
	}
	for inflight > 0 {
		d := <-results
		inflight--
		if d.res.Err != nil && firstErr == nil {
			firstErr = d.res.Err
			cancel()
		}
		p.Bytes += d.res.Bytes
		left[d.slot]--
		switch {
		case firstErr != nil || submitted >= maxBytes:
		case burst == 0 && left[d.slot] == 0:
			random(d.slot)
		case burst > 0 && inflight == 0:
			nextBurst()
		}
	}
	p.Seconds = time.Since(start).Seconds()
	if cpu := sysinfo.ProcessCPUTime(); cpu0 > 0 && cpu > cpu0 {
		p.CPUSeconds = (cpu - cpu0).Seconds()
	}
	if firstErr != nil {
		return p, fmt.Errorf("experts: read probe: %w", firstErr)
	}
	if p.Seconds > 0 {
		p.BytesPerSecond = float64(p.Bytes) / p.Seconds
	}
	return p, nil
}
