// Package host opens an engine exactly as the spool binary does: the
// composition root of the inference engine. Open checks every file of a
// model directory and lays out the memory plan before any weight is read
// (memory.go), opens the GPU for prefill when one is usable and its lines
// fit the plan (gpu.go), loads the model with the streamed expert tier
// sized by the plan (its usage history pinning the hot experts), opens
// the prompt cache (promptcache.go) and builds the scheduler.
//
// spool run, serve and app, the benchmark harnesses of engine/bench, and
// tests open engines here, so that what they measure or check is what a
// user runs. It owns no flags (app/ turns flags into a Config) and serves
// nothing (engine/server does).
package host
