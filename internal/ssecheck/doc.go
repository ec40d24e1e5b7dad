// Package ssecheck is test support for server-sent event streams: it reads
// a stream the way two kinds of client do and says where they disagree.
//
// Spec follows the WHATWG event-stream interpretation: comment lines are
// ignored, and a blank line dispatches an event only when data was given.
// EveryBlank is the reading of clients that dispatch an event on every
// blank line, data or not (openai-go v1.x's decoder, which Genkit, mods and
// fabric are built on, hands such an event to a JSON decoder and ends the
// stream with "unexpected end of JSON input"). Check holds a stream to
// both: every event a strict client dispatches carries data, and both
// readings see the same events.
//
// The server's stream writer is engine/apiwire's SSE; this package only
// reads.
package ssecheck
