package download

import (
	"sort"
	"time"
)

// EventKind says what an Event reports.
type EventKind string

const (
	EventState     EventKind = "state"     // the job's state changed (State, Message)
	EventProgress  EventKind = "progress"  // periodic progress figures
	EventFileDone  EventKind = "file-done" // a file was verified and is in the cache (File)
	EventRetry     EventKind = "retry"     // a request failed and will be retried (File, Message, RetryIn)
	EventIntegrity EventKind = "integrity" // a blob failed verification and is fetched again (File, Message)
	EventWarning   EventKind = "warning"   // something degraded that does not stop the download (Message)
)

// Event is one report from a running job. It is JSON-ready for the UI.
type Event struct {
	Kind     EventKind `json:"kind"`
	Time     time.Time `json:"time"`
	State    State     `json:"state,omitempty"`
	File     string    `json:"file,omitempty"`
	Message  string    `json:"message,omitempty"`
	RetryIn  float64   `json:"retry_in_s,omitempty"` // seconds until the retry
	Progress Progress  `json:"progress"`
}

// Progress is the job's progress at one moment.
type Progress struct {
	Done       int64          `json:"done"`  // bytes of the snapshot on disk (verified, checkpointed or being written)
	Total      int64          `json:"total"` // bytes of the snapshot (each blob counted once)
	Fetched    int64          `json:"fetched"`
	Rate       float64        `json:"rate"`  // bytes per second over the last few seconds
	ETASeconds float64        `json:"eta_s"` // seconds left at Rate; 0 when unknown or done
	FilesDone  int            `json:"files_done"`
	FilesTotal int            `json:"files_total"`
	Active     []FileProgress `json:"active,omitempty"` // files being fetched or verified
}

// ETA is ETASeconds as a duration.
func (p Progress) ETA() time.Duration { return time.Duration(p.ETASeconds * float64(time.Second)) }

// FileProgress is one file's progress.
type FileProgress struct {
	Path  string  `json:"path"`
	Done  int64   `json:"done"`
	Total int64   `json:"total"`
	Rate  float64 `json:"rate"`
}

// rateWindow is the span over which Rate is measured.
const rateWindow = 5 * time.Second

type rateSample struct {
	t time.Time
	n int64
}

// meter turns byte counters sampled over time into rates.
type meter struct {
	samples  []rateSample
	fileLast map[*blobTask]int64
	fileRate map[*blobTask]float64
	lastTime time.Time
}

func newMeter() *meter {
	return &meter{fileLast: map[*blobTask]int64{}, fileRate: map[*blobTask]float64{}}
}

// total records the fetched-bytes counter at t and returns the rate over the
// window.
func (m *meter) total(t time.Time, fetched int64) float64 {
	m.samples = append(m.samples, rateSample{t, fetched})
	cut := 0
	for cut < len(m.samples)-1 && t.Sub(m.samples[cut+1].t) >= rateWindow {
		cut++
	}
	m.samples = m.samples[cut:]
	first := m.samples[0]
	dt := t.Sub(first.t).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(fetched-first.n) / dt
}

// file records one file's done counter and returns its smoothed rate.
func (m *meter) file(t *blobTask, done int64, dt float64) float64 {
	prev, seen := m.fileLast[t]
	m.fileLast[t] = done
	if !seen || dt <= 0 || done < prev {
		return m.fileRate[t]
	}
	inst := float64(done-prev) / dt
	r := m.fileRate[t]*0.7 + inst*0.3
	m.fileRate[t] = r
	return r
}

// snapshot computes progress figures from the run's counters.
func (r *runState) snapshot(m *meter, now time.Time) Progress {
	p := Progress{Total: r.total, FilesTotal: r.filesTotal, Done: r.presentBase}
	p.Fetched = r.fetched.Load()
	dt := 0.0
	if m != nil && !m.lastTime.IsZero() {
		dt = now.Sub(m.lastTime).Seconds()
	}
	p.FilesDone = r.filesPresent
	r.mu.Lock()
	for _, t := range r.tasks {
		done := t.progress.Load()
		p.Done += done
		if t.finished {
			p.FilesDone += len(t.paths)
			continue
		}
		if t.active {
			fp := FileProgress{Path: t.paths[0], Done: done, Total: t.file.Size}
			if m != nil {
				fp.Rate = m.file(t, done, dt)
			}
			p.Active = append(p.Active, fp)
		}
	}
	r.mu.Unlock()
	sort.Slice(p.Active, func(a, b int) bool { return p.Active[a].Path < p.Active[b].Path })
	if m != nil {
		p.Rate = m.total(now, p.Fetched)
		m.lastTime = now
	}
	if p.Rate > 0 && p.Done < p.Total {
		p.ETASeconds = float64(p.Total-p.Done) / p.Rate
	}
	return p
}
