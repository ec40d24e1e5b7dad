// Package pressure owns what gives way under memory pressure: a Governor
// applies the levels native/mempressure reports to the engine's caches,
// which hold only what can be read or computed again — the streamed
// expert tier's LRU (SetLRUShare) and the prompt cache's memory tier
// (SetMemoryShare) — and then returns freed Go heap to the system.
//
// At Warning they keep half of their planned size, at Critical none; at
// Normal they grow back to the plan. The plan's lines stay the ceiling:
// pressure only lowers what is in use, so the footprint stays within the
// plan and the tokens are those of the full caches (only what is read from
// disk or recomputed changes). Stats say the level and what each cache
// holds against its plan, for /stats.
package pressure
