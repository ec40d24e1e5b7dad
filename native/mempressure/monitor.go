package mempressure

import "sync"

// Monitor delivers memory-pressure level changes on Levels until Close.
// Levels is buffered by one and holds the latest level: a slow reader
// misses intermediate levels, never the current one.
type Monitor struct {
	levels chan Level
	source string
	stop   func() // asks the watcher to stop
	done   chan struct{}
	err    error // the watcher's failure, set before done closes

	once sync.Once
}

// Levels returns the channel of level changes; it is closed when the
// monitor stops (Close, or a failure Err reports).
func (m *Monitor) Levels() <-chan Level { return m.levels }

// Source names what the levels come from (a PSI file, or macOS's dispatch
// source).
func (m *Monitor) Source() string { return m.source }

// Close stops the monitor and waits for its goroutine; it returns the
// watcher's failure, if any.
func (m *Monitor) Close() error {
	m.once.Do(m.stop)
	<-m.done
	return m.err
}

// Err returns why the monitor stopped by itself, once Levels is closed.
func (m *Monitor) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// send replaces any level not yet read by l.
func (m *Monitor) send(l Level) {
	for {
		select {
		case m.levels <- l:
			return
		default:
		}
		select {
		case <-m.levels:
		default:
		}
	}
}
