// Package draftgate decides, for one sequence, whether its decode steps
// draft with the MTP layer. A draft costs: the step runs the MTP layer,
// then verifies the token and the draft in one forward that reads the
// union of both positions' experts, about twice a token's where routing
// spreads. It pays only when enough drafts are accepted, which depends on
// the prompt, the model and the machine, and no one can know beforehand.
// So the Gate measures: what an emitted token costs with drafting and
// without (the routed-expert bytes its steps read and their wall time),
// over windows of steps that first explore both modes and later re-check
// the one not chosen from time to time, at intervals that double while the
// choice holds; it drafts only while drafting is cheaper (Ratio says how
// two costs compare: time first, bytes where the times are within
// TimeMargin of each other or the steps' own variation says the clock
// cannot tell them apart).
//
// The gate's time comes from Config.Clock, so that a test drives its
// decisions from counts, never from the clock. The driver (the decode
// core, engine/generate) asks Mode before each lone step and Records what
// the step cost; a batched step (which never drafts) is not recorded.
// The tokens never depend on the gate: drafting is exact.
//
// It does not run forwards, read experts or sample.
package draftgate
