// Package container owns the on-disk model artifact in the Colibri layout: a
// directory of safetensors shards whose tensors are found by name across all
// shards. It validates headers strictly (an artifact is untrusted input),
// resolves the quantized weight formats from byte counts and the config's
// geometry, locates and reads routed experts, checks a whole artifact
// against its config before any weight is read, and writes safetensors files.
//
// It does not interpret weights (no model math), does not cache or schedule
// expert reads (the tier does), and does not parse config.json (package
// config does).
package container
