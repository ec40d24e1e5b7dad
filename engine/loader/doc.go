// Package loader opens a model directory for inference: it reads the
// config, opens and validates the container (headers only, before any
// weight is read: OpenHeaders), loads the resident weights into the model
// (outside the Go heap: the mapped shards when every expert stays in
// memory, one arena when the experts stream) and sets up the routed-expert
// source (Load, or Open for both steps). It owns the open files and closes
// them.
//
// It does not plan memory (engine/plan), tokenize or render prompts
// (engine/tokenizer, engine/chat), or decide how experts are cached
// (engine/experts).
package loader
