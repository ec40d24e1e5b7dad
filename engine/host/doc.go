// Package host is the composition root of the inference engine: Open
// opens every engine the spool binary runs — spool run, serve and app,
// and each leg of the benchmarks — the same way. It checks every file of
// a model directory and lays out the memory plan before any weight is
// read (memory.go), opens the GPU for prefill when one is usable and its
// lines fit the plan (gpu.go), loads the model with its expert tier
// (streamed and sized by the plan, its usage history pinning the hot
// experts; or resident where the caller allows and the plan caches them
// all), opens the prompt cache (promptcache.go), watches memory pressure
// (pressure.go) and builds the scheduler. What it opens goes on a stack
// that Close unwinds in reverse, or Open at once when it fails.
// PreviewOpen plans without loading; FitContext finds the context a
// serving engine plans.
//
// Serving (serving.go) assembles what engine/server serves of an engine:
// the response-format constraints, the expert telemetry, the /stats
// sections and the model's footprint. The package owns no flags (app/
// turns flags into a Config) and serves nothing (engine/server does).
package host
