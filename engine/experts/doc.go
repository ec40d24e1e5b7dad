// Package experts owns where routed experts live. The model never knows: it
// asks a Source for the experts one layer needs for all rows of a forward and
// gets them through a Lease, as they become ready. Implementations range from
// fully resident (every expert in memory) to the streamed tier (slabs, LRU,
// pins, reads from disk).
//
// A Source must be safe for concurrent use (runners may forward at once);
// leases end at a safe point (Release), an expert's memory is never reused
// while leased, and each lease reports what it read (Lease.Cost), which
// the runner records as its forward's cost.
//
// Files, one concept each:
//
//	source.go    Source, Lease, Prefetcher: the interfaces
//	resident.go  Resident, the all-in-memory plain path
//	stream.go    Streamed: construction and accessors
//	options.go   StreamOptions and their defaults
//	layout.go    where an expert's bytes are on disk and in a slab (raw or packed)
//	slots.go     slabs: slot classes, the working bank, LRU and pinned slots
//	lru.go       Acquire: a lease's hits, misses and admissions per the layer's policy
//	policy.go    CachePolicy, the seam of what the LRU slots keep; LRUPolicy
//	fill.go      a fill: one expert read into a slot, on demand or ahead;
//	             where every read lands (telemetry, decode, cost, matrices)
//	lease.go     a lease: its fills, hand-out order, Done, Release, Cost
//	unpack.go    decoding a packed expert in place as its reads land, checked
//	             against its CRC; a damaged record is read from the shard
//	packs.go     opening the packs beside the shards (engine/expertpack);
//	             the damaged records met
//	pins.go      pins chosen at startup from the usage history
//	repin.go     live re-pinning with hysteresis
//	prefetch.go  read-ahead (fills nobody waits for yet); the read order hint
//	guard.go     the footprint guard
//	budget.go    SetLRUShare: the LRU gives way under memory pressure
//	close.go     shutdown
//	probe.go     the disk probed with decoding's access pattern
//	usage.go     the persistent usage history (.coli_usage); one that cannot
//	             be read is set aside (stream.go), never overwritten
//	trace.go     routing traces: recording (replayed by the tests)
//	telemetry.go counters, the expert map, the hit bitmap
package experts
