package model

import "github.com/spoolhq/spool/engine/plan"

// SetAttentionLayout makes m's runners use the attention layout edit makes
// (tests shrink the tiles to cross tile, segment and block boundaries on
// short prompts): the model's own runner is rebuilt, and runners made
// afterwards get it too. It returns a function that restores the previous
// layout.
func SetAttentionLayout(m *Model, edit func(*plan.AttentionLayout)) (restore func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.attnLayout
	edit(&m.attnLayout)
	m.own = nil
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.attnLayout = old
		m.own = nil
	}
}

// SetComputeAllKeys switches m's DSA layers between computing only the
// selected keys and computing every key and masking (Options.ComputeAllKeys)
// and returns a function that restores the previous mode.
func SetComputeAllKeys(m *Model, on bool) (restore func()) {
	old := m.allKeys
	m.allKeys = on
	return func() { m.allKeys = old }
}

// SetArrivalRows makes r apply the routed experts of forwards of at most n
// rows (n <= ArrivalRows) as they arrive, and of larger ones in ascending
// order: 0 sends every forward the ascending way.
func SetArrivalRows(r *Runner, n int) { r.arrival = min(n, ArrivalRows) }
