// Package speed predicts the tokens per second a model will decode and
// prefill at on a machine, before the model is downloaded: from a memory
// plan (how many experts stay cached per layer), the model's bytes, and a
// machine's figures — either probes `spool bench probe` measured on this
// machine and cached (Probes, Load, Save), or published figures of an
// Apple chip (Chips). Predict says in words what it assumed.
//
// The model is a roofline of decode's two overlapping streams, a token
// taking as long as the slower: the disk's (the misses read one layer's
// burst at a time at the probed burst rate, then idle for each layer's last
// product and the next layer's attention and router, which decide what to
// read next) and the cores' (every routed expert and the dense weights at
// the probed rate of the experts' own products, plus the reads' CPU time,
// large where the file system copies them instead of the device: a
// memory-backed file system). docs/speed.md says why, and how well it
// predicted. With an MTP layer it predicts decode with drafts beside plain
// decode, from an assumed acceptance and an assumed union of the experts a
// verify forward's two positions read (a step reads that union and the MTP
// layer's experts, and emits 1 + acceptance tokens), and says which the
// engine's gate would choose by the gate's own rule (engine/draftgate). It
// is a prediction, not a measurement: `spool run --json` measures.
package speed
