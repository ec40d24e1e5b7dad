package model

import "github.com/spoolhq/spool/engine/plan"

// SetAttentionLayout rebuilds m's attention workspace with the layout edit
// makes (tests shrink the tiles to cross tile, segment and block
// boundaries on short prompts) and returns a function that restores the
// previous one.
func SetAttentionLayout(m *Model, edit func(*plan.AttentionLayout)) (restore func()) {
	old := m.attn
	l := old.layout
	edit(&l)
	m.attn = newAttnWorkspace(l)
	return func() { m.attn = old }
}

// SetComputeAllKeys switches m's DSA layers between computing only the
// selected keys and computing every key and masking (Options.ComputeAllKeys)
// and returns a function that restores the previous mode.
func SetComputeAllKeys(m *Model, on bool) (restore func()) {
	old := m.allKeys
	m.allKeys = on
	return func() { m.allKeys = old }
}
