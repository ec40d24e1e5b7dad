// Package rans is Spool's static entropy coder for quantized weights: a
// range asymmetric numeral system (rANS) over nibbles, with a table of
// 7-bit frequencies per stream and Lanes (256) states of 16 bits
// interleaved round robin, each renormalized by single bytes read from one
// shared stream in lane order.
//
// A nibble alphabet is the int4 code itself (a byte holds two, low nibble
// first), and the small table is what makes decoding fast: the symbol of a
// slot is one 128-entry byte lookup and its frequency and start 16-entry
// ones, which SIMD does with in-register shuffles rather than gathers
// (kernels/rans.c: AVX-512 VBMI2 32 lanes a register, AVX2 16, NEON 8,
// and portable C; kernels/rans.go has the Go reference they all match,
// bit for bit, on any input; Loops lists a machine's). Seven
// bits of probability cost about 1% in size against an exact model on
// GLM-5.2's code statistics.
//
// Encode runs the kernels' encoder (kernels/rans_encode.c where cgo is on,
// the Go reference elsewhere; the same bytes); Decode runs the kernels'
// loop and refuses, with an error wrapping ErrCorrupt and never a panic,
// anything that is not an encoder's output: decoding is a bijection, so a
// block that decodes cleanly re-encodes to itself. That is framing, not a
// checksum: a changed byte of a coded block is refused about 99 times in
// 100 on GLM-5.2's statistics, and otherwise decodes, cleanly, to other
// bytes, as a changed byte of raw weights would (engine/expertpack keeps
// the experts' checksums).
//
// The package knows nothing of files, tensors or experts: engine/expertpack
// frames coded blocks into packed expert records.
package rans
