// Package experts owns where routed experts live. The model never knows: it
// asks a Source for the experts one layer needs for all rows of a forward and
// gets them through a Lease, as they become ready. Implementations range from
// fully resident (every expert in memory) to the streamed tier (slabs, LRU,
// pins, reads from disk).
//
// A Source must be safe for use by one forward at a time; leases end at a safe
// point (Release), and an expert's memory is never reused while leased.
package experts
