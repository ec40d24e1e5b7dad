// Package synthetic writes synthetic GLM-5.2 artifacts to measure on: a
// deterministic (seeded) container in the Colibri layout whose routed
// experts have the real per-expert geometry (hidden 6144, expert width
// 2048: 18,915,328 bytes per expert with per-row int4 scales, 21,233,664
// with group-64 scales) around a small everything-else, or a full 78-layer
// skeleton of the real artifact whose payloads are holes but for the
// tensors routing depends on (embedding, norms, routers, correction
// biases), which are seeded so that prompts spread over the experts.
//
// Its routers spread a prompt's tokens over the experts as a trained
// model's do, so expert I/O measured on it means something.
//
// It streams every payload (a 256-expert layer is 4.8 GB; nothing holds a
// whole tensor file in memory) through container.Writer, and writes
// config.json with config.Config.Encode. It does not read models, run them
// or decide what a benchmark measures.
package synthetic
