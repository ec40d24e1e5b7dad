package download

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/native/power"
	"github.com/spoolhq/spool/native/sysinfo"
)

// The default download target.
const (
	DefaultRepo     = "mateogrgic/GLM-5.2-colibri-int4-with-int8-mtp"
	DefaultRevision = "3cc8db99b1b13fc79325d987ba3c1c430766b3b8"
)

// Defaults of Options.
const (
	DefaultConnections         = 8
	DefaultChunkSize           = 64 << 20
	DefaultCheckpointBytes     = 16 << 20
	DefaultCheckpointInterval  = 500 * time.Millisecond
	DefaultStallTimeout        = 30 * time.Second
	DefaultMaxRetries          = 12
	DefaultRetryBase           = time.Second
	DefaultRetryMax            = 60 * time.Second
	DefaultMaxIntegrityRetries = 2
	DefaultProgressInterval    = 250 * time.Millisecond
	// MinReserve is the smallest free-space reserve kept beyond the download
	// itself; the reserve is the larger of it and 1% of the bytes to fetch.
	MinReserve = 2 << 30
)

// Options configure a Job. Repo, CacheDir and Client are required; every
// other zero field takes its default.
type Options struct {
	Repo     string // owner/name
	Revision string // branch, tag or commit; "" means "main"
	// CacheDir is the directory the files go under: the hub cache
	// (HF_HUB_CACHE) unless Layout says otherwise. Free space is
	// measured on its volume.
	CacheDir string
	Client   *hub.Client // the hub
	// Layout places the files; nil means the Hugging Face cache in
	// CacheDir (HubCache).
	Layout Layout
	// Admit, when set, is asked before a blob's first byte is fetched
	// whether it may start now; a blob it refuses waits until it says
	// yes, asked again after every Wake. Blobs already started are not
	// asked. Engine/pull uses it to keep a bounded number of shards on
	// disk raw while earlier ones are packed.
	Admit func(f hub.File) bool
	// Need, when set, says how many bytes the files still to fetch will
	// take on the volume (fewer than the bytes fetched when they are
	// packed as they arrive), with a sentence saying why; the preflight
	// checks that plus the reserve. nil: the bytes to fetch.
	Need func(p *Plan) (bytes int64, why string)

	Connections int   // parallel range requests (default 8)
	ChunkSize   int64 // bytes per range request (default 64 MiB)
	// CheckpointBytes is how many bytes of a range a worker writes between
	// two checkpoints (default 16 MiB, at most ChunkSize), and
	// CheckpointInterval the longest time between two (default 500 ms), so
	// that a slow link checkpoints too. A crash loses at most the smaller
	// of the two per connection.
	CheckpointBytes    int64
	CheckpointInterval time.Duration
	StallTimeout       time.Duration // abort a request that moves no byte for this long (default 30 s)
	// MaxRetries is how many failed requests in a row, without a byte of
	// progress, one range may have before the job fails (default 12).
	MaxRetries int
	RetryBase  time.Duration // first retry delay, doubled per failure (default 1 s)
	RetryMax   time.Duration // longest retry delay (default 60 s)
	// MaxIntegrityRetries is how many times a blob that fails verification
	// is fetched again before the job fails (default 2).
	MaxIntegrityRetries int
	// Reserve is the free space kept beyond the bytes to fetch; 0 means the
	// default (the larger of MinReserve and 1% of the bytes to fetch) and a
	// negative value means none.
	Reserve          int64
	ProgressInterval time.Duration // time between progress events (default 250 ms)

	// Storage opens partial blobs for writing; nil means the OS.
	Storage Storage
	// DiskFree reports free space; nil means sysinfo.DiskFree.
	DiskFree func(path string) (sysinfo.DiskSpace, error)
	// KeepAwake holds off idle sleep while bytes are fetched; nil means
	// power.PreventSleep.
	KeepAwake func(reason string) (release func(), err error)
	// OnEvent receives every event, one call at a time; it must return
	// quickly. It may call Pause, Resume and Cancel.
	OnEvent func(Event)
}

func (o *Options) setDefaults() {
	if o.Revision == "" {
		o.Revision = "main"
	}
	if o.Connections <= 0 {
		o.Connections = DefaultConnections
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	o.CheckpointBytes = min(o.CheckpointBytes, o.ChunkSize)
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.MaxIntegrityRetries <= 0 {
		o.MaxIntegrityRetries = DefaultMaxIntegrityRetries
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.Storage == nil {
		o.Storage = OSStorage{}
	}
	if o.DiskFree == nil {
		o.DiskFree = sysinfo.DiskFree
	}
	if o.KeepAwake == nil {
		o.KeepAwake = power.PreventSleep
	}
}

// State is where a job stands.
type State string

const (
	StateIdle        State = "idle"        // created, not running
	StateDownloading State = "downloading" // fetching and verifying
	StatePaused      State = "paused"      // stopped by Pause; Resume continues
	StateDone        State = "done"        // every file is in the cache
	StateFailed      State = "failed"      // stopped by an error; progress kept
	StateCancelled   State = "cancelled"   // stopped by Cancel or the context; progress kept
)

// Errors Run returns (wrapped) for the ways a job ends other than success.
var (
	ErrCancelled = errors.New("download cancelled")
	ErrDiskFull  = errors.New("disk full")
	ErrIntegrity = errors.New("downloaded bytes failed verification")
	ErrRunning   = errors.New("download already running")
)

var (
	errPaused     = errors.New("download paused")
	errCancelCall = errors.New("download cancelled by Cancel")
)

// Job downloads one repository revision. Plan and Run may be called from one
// goroutine; Pause, Resume, Cancel, State and Progress from any.
type Job struct {
	opts   Options
	layout Layout

	mu        sync.Mutex // guards the fields below
	state     State
	running   bool
	manifest  *hub.Manifest
	paused    bool
	cancelled bool
	runCancel context.CancelCauseFunc
	rs        *runState     // the running Run's, for Wake
	wake      chan struct{} // closed and replaced by Resume and Cancel
	last      Progress      // last progress computed by the reporter

	emitMu sync.Mutex // serializes OnEvent calls
}

// New returns a job for opts.
func New(opts Options) (*Job, error) {
	if err := hub.ValidateRepoID(opts.Repo); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if opts.Revision != "" {
		if err := hub.ValidateRevision(opts.Revision); err != nil {
			return nil, fmt.Errorf("download: %w", err)
		}
	}
	if opts.CacheDir == "" {
		return nil, errors.New("download: no cache directory")
	}
	if opts.Client == nil {
		return nil, errors.New("download: no hub client")
	}
	opts.setDefaults()
	layout := opts.Layout
	if layout == nil {
		layout = HubCache(opts.CacheDir, opts.Repo)
	}
	return &Job{
		opts:   opts,
		layout: layout,
		state:  StateIdle,
		wake:   make(chan struct{}),
	}, nil
}

// State returns the job's state.
func (j *Job) State() State {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state
}

// Progress returns the latest progress figures.
func (j *Job) Progress() Progress {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// Pause stops fetching after checkpointing what reached the disk; Resume
// continues. Pausing a job that is not running makes its next Run start
// paused.
func (j *Job) Pause() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state == StateDone || j.cancelled {
		return
	}
	j.paused = true
	if j.runCancel != nil {
		j.runCancel(errPaused)
	}
}

// Resume continues a paused job.
func (j *Job) Resume() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.paused {
		return
	}
	j.paused = false
	close(j.wake)
	j.wake = make(chan struct{})
}

// Cancel stops the job for good; Run returns an error wrapping ErrCancelled.
// Partial blobs and their resume records are kept, so a new job resumes them.
func (j *Job) Cancel() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancelled || j.state == StateDone {
		return
	}
	j.cancelled = true
	if j.runCancel != nil {
		j.runCancel(errCancelCall)
	}
	close(j.wake)
	j.wake = make(chan struct{})
}

// setState records and announces a new state.
func (j *Job) setState(s State, msg string) {
	j.mu.Lock()
	changed := j.state != s
	j.state = s
	p := j.last
	j.mu.Unlock()
	if changed {
		j.emit(Event{Kind: EventState, State: s, Message: msg, Progress: p})
	}
}

func (j *Job) emit(e Event) {
	if j.opts.OnEvent == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	j.emitMu.Lock()
	defer j.emitMu.Unlock()
	j.opts.OnEvent(e)
}
