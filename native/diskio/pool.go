package diskio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrPoolClosed is returned by Submit after Close, and reported for requests
// that were queued or in flight when the pool closed.
var ErrPoolClosed = errors.New("diskio: read pool closed")

// MaxReadWorkers bounds the number of workers of a ReadPool.
const MaxReadWorkers = 64

// queuePerWorker is how many requests per worker may wait in the queue
// before Submit blocks.
const queuePerWorker = 4

// ReadRequest asks a ReadPool to read the byte range [Off, Off+Len) of File
// into Slab with (*DirectFile).ReadAtAligned: Slab must be DirectAlign-aligned
// and at least AlignedSpan(Off, Len) long; SlabLen(Len) is always enough.
type ReadRequest struct {
	File *DirectFile
	Off  int64
	Len  int64
	Slab []byte
	// Tag is returned unchanged in the result, for the caller's bookkeeping.
	Tag any
	// Background requests wait in a queue of their own, served only when
	// no other request waits: reading ahead never delays a read that is
	// needed now, beyond the background reads already being served.
	Background bool
	// Done, if not nil, is called with the result on the worker goroutine
	// before the result is sent on the channel returned by Submit. It should
	// return quickly: the worker serves no other request until it does.
	Done func(ReadResult)
}

// ReadResult reports one completed ReadRequest.
type ReadResult struct {
	Tag  any
	Data []byte // the sub-slice of Slab holding exactly [Off, Off+Len); nil on error
	// Bytes is the number of bytes requested from the file system: the
	// aligned span for a direct file, Len otherwise; 0 when the read did not
	// start.
	Bytes   int64
	Wait    time.Duration // from Submit to the start of service
	Service time.Duration // time spent reading
	Err     error
}

// ReadPool runs ReadRequests on a fixed set of worker goroutines fed by a
// bounded queue. Every accepted request gets exactly one ReadResult, even when
// its context is cancelled or the pool closes.
type ReadPool struct {
	queue chan *readJob
	bg    chan *readJob // background requests
	done  chan struct{} // closed by Close
	wg    sync.WaitGroup

	mu     sync.RWMutex // held for reading by Submit while enqueueing
	closed bool

	closeOnce sync.Once
	workers   int

	meter activityMeter
}

// Activity is what a ReadPool's workers did since it started: the time at
// least one request was being read, and the integral over time of the
// number being read (divided by a span, the mean depth the disk saw).
type Activity struct {
	Busy  time.Duration
	Depth time.Duration // sum over requests of their service time
}

// Sub returns a-b: the activity between two snapshots.
func (a Activity) Sub(b Activity) Activity {
	return Activity{Busy: a.Busy - b.Busy, Depth: a.Depth - b.Depth}
}

// activityMeter accumulates Activity as requests start and end service.
// Workers report out of order by a little (each reads the clock before it
// takes the lock), so a busy span never runs backwards, and depth is the
// sum of the service times themselves.
type activityMeter struct {
	mu     sync.Mutex
	active int
	since  time.Time // the last change of active
	acc    Activity
}

func (m *activityMeter) start(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advanceLocked(at)
	m.active++
}

func (m *activityMeter) end(start, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advanceLocked(at)
	m.active--
	m.acc.Depth += at.Sub(start)
}

func (m *activityMeter) advanceLocked(now time.Time) {
	if now.Before(m.since) {
		return
	}
	if m.active > 0 {
		m.acc.Busy += now.Sub(m.since)
	}
	m.since = now
}

func (m *activityMeter) snapshot(now time.Time) Activity {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advanceLocked(now)
	return m.acc
}

// Activity returns the pool's activity so far; subtract two snapshots
// (Activity.Sub) for a span's.
func (p *ReadPool) Activity() Activity { return p.meter.snapshot(time.Now()) }

type readJob struct {
	ctx    context.Context
	req    ReadRequest
	queued time.Time
	result chan ReadResult
}

// NewReadPool starts a pool of workers goroutines (clamped to
// 1..MaxReadWorkers) whose queue holds 4 requests per worker. Stop it with
// Close.
func NewReadPool(workers int) *ReadPool {
	workers = min(max(workers, 1), MaxReadWorkers)
	p := &ReadPool{
		queue:   make(chan *readJob, workers*queuePerWorker),
		bg:      make(chan *readJob, workers*queuePerWorker),
		done:    make(chan struct{}),
		workers: workers,
	}
	p.wg.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

// Workers returns the number of worker goroutines.
func (p *ReadPool) Workers() int { return p.workers }

// QueueDepth returns how many requests may wait before Submit blocks.
func (p *ReadPool) QueueDepth() int { return cap(p.queue) }

// Submit queues req and returns the channel on which its single result will
// be sent; the channel is buffered, so nobody has to receive from it. Submit
// blocks while the queue is full. It fails without queueing when req is
// malformed, ctx ends first, or the pool is closed. A request whose ctx ends
// while it waits in the queue completes with ctx's error without reading; one
// whose ctx ends while it is read stops at the next chunk boundary.
func (p *ReadPool) Submit(ctx context.Context, req ReadRequest) (<-chan ReadResult, error) {
	if req.File == nil {
		return nil, fmt.Errorf("diskio: submit read: request has no file")
	}
	if err := req.File.checkRange(req.Off, req.Len); err != nil {
		return nil, err
	}
	if req.Len > 0 {
		if _, _, err := req.File.checkSlab(req.Slab, req.Off, req.Len); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("diskio: submit read of %s at offset %d: %w", req.File.path, req.Off, err)
	}
	j := &readJob{ctx: ctx, req: req, queued: time.Now(), result: make(chan ReadResult, 1)}

	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	q := p.queue
	if req.Background {
		q = p.bg
	}
	select {
	case q <- j:
		return j.result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("diskio: submit read of %s at offset %d: %w", req.File.path, req.Off, ctx.Err())
	case <-p.done:
		return nil, ErrPoolClosed
	}
}

// Close stops accepting requests, stops reads in flight at their next chunk
// boundary, completes every queued request with ErrPoolClosed, and waits for
// all workers to exit. It is safe to call more than once.
func (p *ReadPool) Close() error {
	p.closeOnce.Do(func() {
		close(p.done) // wakes Submit calls blocked on a full queue
		p.mu.Lock()   // waits for them to leave
		p.closed = true
		p.mu.Unlock()
		p.wg.Wait()
		for {
			select {
			case j := <-p.queue:
				p.finish(j, ReadResult{Tag: j.req.Tag, Wait: time.Since(j.queued), Err: ErrPoolClosed})
			case j := <-p.bg:
				p.finish(j, ReadResult{Tag: j.req.Tag, Wait: time.Since(j.queued), Err: ErrPoolClosed})
			default:
				return
			}
		}
	})
	return nil
}

func (p *ReadPool) work() {
	defer p.wg.Done()
	for {
		// Prefer stopping over serving once Close has begun.
		select {
		case <-p.done:
			return
		default:
		}
		// A waiting request goes before any background one.
		select {
		case j := <-p.queue:
			p.serve(j)
			continue
		default:
		}
		select {
		case <-p.done:
			return
		case j := <-p.queue:
			p.serve(j)
		case j := <-p.bg:
			p.serve(j)
		}
	}
}

func (p *ReadPool) serve(j *readJob) {
	start := time.Now()
	res := ReadResult{Tag: j.req.Tag, Wait: start.Sub(j.queued)}
	if err := p.stopErr(j.ctx); err != nil {
		res.Err = p.wrapStop(j, err)
		p.finish(j, res)
		return
	}
	req := j.req
	p.meter.start(start)
	data, err := req.File.readAligned(req.Slab, req.Off, req.Len, func() error { return p.stopErr(j.ctx) })
	end := time.Now()
	p.meter.end(start, end)
	res.Service = end.Sub(start)
	res.Bytes = req.Len
	if req.File.direct && req.Len > 0 {
		_, res.Bytes = AlignedSpan(req.Off, req.Len)
	}
	if err != nil {
		res.Err = err
	} else {
		res.Data = data
	}
	p.finish(j, res)
}

// stopErr returns ErrPoolClosed once Close has begun, else ctx's error.
func (p *ReadPool) stopErr(ctx context.Context) error {
	select {
	case <-p.done:
		return ErrPoolClosed
	default:
	}
	return ctx.Err()
}

func (p *ReadPool) wrapStop(j *readJob, err error) error {
	if errors.Is(err, ErrPoolClosed) {
		return err
	}
	return fmt.Errorf("diskio: read of %s at offset %d length %d: %w", j.req.File.path, j.req.Off, j.req.Len, err)
}

func (p *ReadPool) finish(j *readJob, res ReadResult) {
	if j.req.Done != nil {
		j.req.Done(res)
	}
	j.result <- res
}
