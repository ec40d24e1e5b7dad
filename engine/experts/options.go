package experts

import (
	"fmt"
	"log/slog"

	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/native/diskio"
)

// StreamOptions size and tune a Streamed source.
type StreamOptions struct {
	// CacheBytes is the slab memory of the LRU and pinned tiers together,
	// beyond the working bank. Each expert layer gets the same number of
	// LRU slots: (CacheBytes - pinned slab bytes) / (one slot in every
	// expert layer). 0 means no cache: every expert is read per forward.
	CacheBytes int64
	// WorkingSlots is the working bank of decoder-layer slots that stream
	// the misses no LRU slot takes (default 2 x experts_per_tok). The MTP
	// layer's experts (twice as wide) get min(WorkingSlots,
	// experts_per_tok) slots of their own.
	WorkingSlots int
	// Workers is the number of positioned-read workers, each with one
	// request in flight (default DefaultReadWorkers).
	Workers int
	// PinnedBytes is the slab memory, taken out of CacheBytes, for experts
	// pinned at startup: the most used ones of the usage history, ranked
	// by count (ties: lower layer, then lower expert id first), admitted
	// while the next one still fits.
	PinnedBytes int64
	// UsagePath is the persistent usage history (the .coli_usage text
	// format). It is read at startup when it exists and written
	// atomically by SaveUsage and Close. Empty: no history.
	UsagePath string
	// FootprintLimit, when positive, is the process footprint budget: every
	// GuardEvery forwards the footprint is sampled and, while it is above
	// the limit, each layer's LRU gives back one slot (the least recently
	// used unleased one), freeing its slab.
	FootprintLimit int64
	// GuardEvery is the forwards between footprint samples (default 16).
	GuardEvery int
	// ReadChunk bounds one read request (default 4 MiB, rounded up to the
	// direct-I/O alignment): an expert's bytes go out as several requests
	// so that a layer's few misses keep every worker busy.
	ReadChunk int64
	// Packs says whether experts are read from the packs
	// (engine/expertpack) beside the shards, which hold them in fewer
	// bytes (default PacksAuto).
	Packs PackPolicy
	// DecodeLoop is the rANS loop that decodes packed experts (the zero
	// Loop: the fastest this machine runs; benchmarks compare them).
	DecodeLoop rans.Loop
	// RepinEvery, when positive, re-pins live every that many forwards
	// (see repin.go): a pinned expert the session stopped using trades
	// places with a hot one from the LRU, with hysteresis. Needs pins.
	RepinEvery int
	// Prefetch turns on reading ahead (Prefetcher): the model names the
	// experts it predicts the next layer will route to, and they are read
	// at background priority into free working slots.
	Prefetch bool
	// Trace, when set, records every Acquire (see RouteTrace).
	Trace *RouteTrace
	// Policy, when set, makes each layer's CachePolicy (one call per
	// layer); nil: LRUPolicy.
	Policy func() CachePolicy
	// Buffered reads through the page cache instead of direct I/O (for file
	// systems that refuse direct I/O; OpenDirect falls back by itself).
	Buffered bool
	// Logger hears about damaged pack records read from the shards
	// instead, damaged experts, and usage histories set aside (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Repairer, when set, restores the bytes of an expert a read finds
	// damaged, which is then read again once (see Repairer); nil: damage
	// is reported.
	Repairer Repairer
}

// DefaultReadWorkers is the read depth: requests of ReadChunk in flight at
// once. Eight kept the disks measured busy (a device host's at 1.9 GB/s,
// this VM's at 1.7), and more does harm: a layer's misses are queued in
// the order the products take them, and with a shallow queue the first
// experts land first and are applied while the rest are read. With 40 in
// flight (a token's experts of a layer all at once) the layer's experts
// landed at about the same time, nothing overlapped, and the 2-core VM
// decoded P2 from its disk 5-15% slower; the device host read no faster.
const DefaultReadWorkers = 8

// newPolicy makes one layer's cache policy.
func (o *StreamOptions) newPolicy() CachePolicy {
	if o.Policy != nil {
		return o.Policy()
	}
	return &LRUPolicy{}
}

// normalize checks the options and fills in the defaults; k is the
// model's experts per token.
func (o *StreamOptions) normalize(k int) error {
	if o.CacheBytes < 0 || o.ReadChunk < 0 || o.PinnedBytes < 0 || o.WorkingSlots < 0 || o.Workers < 0 || o.FootprintLimit < 0 || o.GuardEvery < 0 || o.RepinEvery < 0 {
		return fmt.Errorf("experts: stream options must not be negative: %+v", *o)
	}
	if o.WorkingSlots == 0 {
		o.WorkingSlots = 2 * k
	}
	if o.Workers == 0 {
		o.Workers = DefaultReadWorkers
	}
	if o.GuardEvery == 0 {
		o.GuardEvery = 16
	}
	if o.ReadChunk == 0 {
		o.ReadChunk = 4 << 20
	}
	o.ReadChunk = (o.ReadChunk + diskio.DirectAlign - 1) / diskio.DirectAlign * diskio.DirectAlign
	o.PinnedBytes = min(o.PinnedBytes, o.CacheBytes)
	return nil
}

// PackPolicy says when a Streamed source reads experts from packs.
type PackPolicy int

const (
	// PacksAuto reads packs where the decode loop is fast enough to hide
	// under the reads (rans.Loop.Fast: AVX-512, NEON); elsewhere decoding
	// costs more time than the fewer bytes save, and the experts are read
	// from the shards, with a note saying so.
	PacksAuto PackPolicy = iota
	// PacksRead reads packs wherever they are current.
	PacksRead
	// PacksIgnore reads every expert from its shard.
	PacksIgnore
)
