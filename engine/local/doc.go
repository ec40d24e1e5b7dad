// Package local is the local engine: it runs turns (engine/turn) on the
// model in this process.
//
// A turn's conversation is rendered with the model's chat template
// (engine/chat) within bounds that grow with the context, tokenized, and
// checked against the context; its sampling is laid over the model's
// generation_config; a JSON format is compiled into a grammar constraint
// (engine/grammar) and a forced tool choice into the GLM tool-call
// constraint (engine/glm). The turn is queued on the scheduler
// (engine/scheduler), and its Stream reads the tokens back: it detokenizes
// them, matches the stop strings, reads reasoning and tool calls out of
// the text with the GLM dialect's parser (minting the calls' ids), and
// gives an Idle piece each keep-alive interval it waits. Embeddings run on
// the same scheduler (embed.go).
//
// An Observer hears every turn's progress (the live status, the UI's
// token events). The package serves no HTTP and speaks no API: each API
// translates its requests into turns and the pieces back (engine/api/...,
// engine/server).
package local
