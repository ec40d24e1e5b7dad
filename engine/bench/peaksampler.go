package bench

import (
	"sync"
	"time"

	"github.com/spoolhq/spool/native/sysinfo"
)

// peakSampler records the process's largest RSS and footprint.
type peakSampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	rss, fp uint64
	once    sync.Once
}

func startPeakSampler(every time.Duration) *peakSampler {
	s := &peakSampler{done: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *peakSampler) sample() {
	fs, err := sysinfo.Footprint()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.rss, s.fp = max(s.rss, fs.RSS, sysinfo.PeakRSS()), max(s.fp, fs.Footprint)
	s.mu.Unlock()
}

// stop ends sampling (once; later calls only read) and returns the peaks.
func (s *peakSampler) stop() (rss, footprint uint64) {
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
		s.sample()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.fp
}
