// Package speed predicts the tokens per second a model will decode and
// prefill at on a machine, before the model is downloaded: from a memory
// plan (how many experts stay cached per layer), the model's bytes, and a
// machine's figures — either probes `spool bench probe` measured on this
// machine and cached (Probes, Load, Save), or published figures of an
// Apple chip (Chips). Predict says in words what it assumed.
//
// The model is a roofline of decode's two streams: the routed experts a
// token misses in the cache are read from the SSD at the probed random-read
// rate while the experts that have landed are applied at the probed kernel
// rate, layer after layer; the dense weights are applied once per token.
// It is a prediction, not a measurement: `spool run --json` measures.
package speed
