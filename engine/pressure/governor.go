package pressure

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/spoolhq/spool/native/mempressure"
)

// ExpertCache is the streamed expert tier's side (experts.Streamed).
type ExpertCache interface {
	// SetLRUShare keeps share (0..1) of the planned LRU slots of every
	// expert layer; it returns the slots per layer now targeted.
	SetLRUShare(share float64) (int, error)
}

// PromptCache is the prompt cache's side (promptcache.Cache).
type PromptCache interface {
	// SetMemoryShare caps the memory tier at share (0..1) of its planned
	// bytes; it returns the cap now in force.
	SetMemoryShare(share float64) (int64, error)
}

// Share is the part of its planned size each cache keeps at a level.
func Share(l mempressure.Level) float64 {
	switch l {
	case mempressure.Warning:
		return 0.5
	case mempressure.Critical:
		return 0
	}
	return 1
}

// Stats are the governor's state for /stats.
type Stats struct {
	// Source names where the levels come from; Off says why there are
	// none (the caches then keep their planned sizes).
	Source string `json:"source,omitempty"`
	Off    string `json:"off,omitempty"`
	// Level is the level in force and Share what the caches keep of the
	// plan; Warnings and Criticals count the times each level began.
	Level     mempressure.Level `json:"level"`
	Share     float64           `json:"share"`
	Warnings  int               `json:"warnings"`
	Criticals int               `json:"criticals"`
	// ExpertLRUSlots is the LRU slots per expert layer now targeted, of
	// the plan's ExpertLRUPlanned; PromptCacheMemoryBytes the prompt
	// cache's memory tier cap now, of the plan's PromptCachePlannedBytes.
	// The planned figures are those of the last Normal.
	ExpertLRUSlots          int   `json:"expert_lru_slots_per_layer"`
	ExpertLRUPlanned        int   `json:"expert_lru_slots_per_layer_planned"`
	PromptCacheMemoryBytes  int64 `json:"prompt_cache_memory_cap_bytes"`
	PromptCachePlannedBytes int64 `json:"prompt_cache_memory_planned_bytes"`
	// Err is the last failure to resize a cache (growing back can fail
	// when the system refuses memory).
	Err string `json:"error,omitempty"`
}

// Governor applies memory-pressure levels to the caches. Its methods are
// safe for concurrent use.
type Governor struct {
	experts ExpertCache // nil: none to resize
	prompts PromptCache // nil: none

	mu sync.Mutex
	st Stats
}

// New returns a governor over the caches (either may be nil) at Normal.
func New(experts ExpertCache, prompts PromptCache) *Governor {
	g := &Governor{experts: experts, prompts: prompts}
	g.st.Share = 1
	return g
}

// Apply resizes the caches for level l and returns the Go heap they freed
// to the system.
func (g *Governor) Apply(l mempressure.Level) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	share := Share(l)
	var errs []error
	if g.experts != nil {
		n, err := g.experts.SetLRUShare(share)
		g.st.ExpertLRUSlots = n
		if share == 1 && err == nil {
			g.st.ExpertLRUPlanned = n
		}
		errs = append(errs, err)
	}
	if g.prompts != nil {
		n, err := g.prompts.SetMemoryShare(share)
		g.st.PromptCacheMemoryBytes = n
		if share == 1 && err == nil {
			g.st.PromptCachePlannedBytes = n
		}
		errs = append(errs, err)
	}
	if l != g.st.Level {
		switch l {
		case mempressure.Warning:
			g.st.Warnings++
		case mempressure.Critical:
			g.st.Criticals++
		}
	}
	g.st.Level, g.st.Share = l, share
	if share < 1 {
		// Evicted prompt blocks are Go heap: give the pages back now
		// rather than at the collector's leisure.
		debug.FreeOSMemory()
	}
	err := errors.Join(errs...)
	g.st.Err = ""
	if err != nil {
		g.st.Err = err.Error()
		return fmt.Errorf("pressure: applying %s: %w", l, err)
	}
	return nil
}

// Run applies every level received until levels is closed or ctx ends,
// recording source as where they come from. A failed resize is recorded
// in Stats and does not stop it.
func (g *Governor) Run(ctx context.Context, source string, levels <-chan mempressure.Level) {
	g.mu.Lock()
	g.st.Source, g.st.Off = source, ""
	g.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case l, ok := <-levels:
			if !ok {
				return
			}
			g.Apply(l)
		}
	}
}

// SetOff records why no levels come (no monitor on this system).
func (g *Governor) SetOff(reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Off = reason
}

// Stats returns the governor's state.
func (g *Governor) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

// Watch subscribes to the system's memory pressure (mempressure.Start)
// and applies its levels until ctx ends. Where the system has no
// notifications it records why in Stats and returns.
func (g *Governor) Watch(ctx context.Context) {
	m, err := mempressure.Start(ctx)
	if err != nil {
		g.SetOff(err.Error())
		return
	}
	defer m.Close()
	g.Run(ctx, m.Source(), m.Levels())
	if err := m.Err(); err != nil {
		g.SetOff(err.Error())
	}
}
