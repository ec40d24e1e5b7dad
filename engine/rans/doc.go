// Package rans is Spool's static entropy coder for quantized weights: a
// range asymmetric numeral system (rANS) over bytes, with a table of
// 12-bit frequencies per stream and Lanes (32) states interleaved round
// robin, renormalized by 16-bit words read from one shared stream in lane
// order (the "32x16" construction of interleaved rANS coders, as in
// htscodecs' rANS-Nx16 and Colibri's int4-rans256 tier, whose table is per
// shard and alphabet 4-bit).
//
// A byte alphabet codes int4 weights two codes at a time and int8 weights
// one, so one decode step yields a whole byte of either. Encode is plain
// Go (offline, at pack time); Decode runs the kernels' SIMD loop with a
// checked scalar tail and refuses, with an error wrapping ErrCorrupt and
// never a panic, anything that is not an encoder's output.
//
// The package knows nothing of files, tensors or experts: engine/expertpack
// frames coded blocks into packed expert records.
package rans
