package plan

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/internal/bytesize"
)

// Prompt cache line items.
const (
	ItemPromptCache   = "prompt cache"
	ItemPromptCacheIO = "prompt cache I/O buffers"
)

// PromptCacheMemory is what the prompt cache (engine/promptcache) may hold
// in memory; promptcache.Footprint fills it from the cache's options.
type PromptCacheMemory struct {
	// TierBytes caps the memory tier's blocks.
	TierBytes int64
	// BacklogBytes bounds the blocks evicted from memory that wait to be
	// written to disk (0 without a disk tier).
	BacklogBytes int64
	// ReadBuffers direct-read slabs of ReadBufferBytes each (with the block
	// decoded from one) serve restores from disk; WriteBufferBytes is the
	// writer's encoded block.
	ReadBuffers      int
	ReadBufferBytes  int64
	WriteBufferBytes int64
	// BlockTokens and BlockBytes describe one block (for the detail).
	BlockTokens int
	BlockBytes  int64
}

// PromptCacheShare is the memory tier's share of the memory the fixed
// lines leave (which the expert cache takes otherwise): a sixteenth, and at
// most the blocks of one sequence's full context. The disk tier holds the
// rest: restoring from it reads the SSD at its bandwidth, while every
// slot the expert cache loses costs reads on every token.
const PromptCacheShare = 16

// promptCacheItems sizes the memory tier of m when it asks the plan to
// (TierBytes 0) from what fixed leaves, records it, and returns the lines.
func (p *Plan) promptCacheItems(m PromptCacheMemory, fixed int64) []Item {
	if m.TierBytes == 0 && m.BlockTokens > 0 && m.BlockBytes > 0 {
		io := m.BacklogBytes + int64(m.ReadBuffers)*m.ReadBufferBytes + m.WriteBufferBytes
		avail := max(p.MemoryLimitBytes-fixed-io, 0)
		blocks := int64((p.Context + m.BlockTokens - 1) / m.BlockTokens)
		m.TierBytes = min(blocks*m.BlockBytes, avail/PromptCacheShare) / m.BlockBytes * m.BlockBytes
	}
	p.PromptCacheBytes = m.TierBytes
	return PromptCacheItems(m)
}

// PromptCacheItems are the prompt cache's lines of the plan: the memory
// tier with its spill backlog, and the I/O buffers of the disk tier. A cache
// with neither tier has no lines.
func PromptCacheItems(m PromptCacheMemory) []Item {
	var items []Item
	if tier := m.TierBytes + m.BacklogBytes; tier > 0 {
		d := fmt.Sprintf("memory tier cap %s (%d-token blocks of %s)", bytesize.IEC(m.TierBytes), m.BlockTokens, bytesize.IEC(m.BlockBytes))
		if m.BacklogBytes > 0 {
			d += fmt.Sprintf(" + %s of evicted blocks waiting to be written to disk", bytesize.IEC(m.BacklogBytes))
		}
		items = append(items, Item{ItemPromptCache, tier, d})
	}
	if io := int64(m.ReadBuffers)*m.ReadBufferBytes + m.WriteBufferBytes; io > 0 {
		items = append(items, Item{ItemPromptCacheIO, io, fmt.Sprintf("%d direct-read slabs with their decoded blocks x %s, one encoded block %s", m.ReadBuffers, bytesize.IEC(m.ReadBufferBytes), bytesize.IEC(m.WriteBufferBytes))})
	}
	return items
}

// CacheGeometry is what one token of a sequence stores when the model of
// cfg runs with weights w: what a prompt cache sized before the model loads
// needs to know.
func CacheGeometry(cfg *config.Config, w Weights) kvcache.Geometry { return kvGeometry(cfg, w) }
