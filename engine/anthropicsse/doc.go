// Package anthropicsse owns the framing of an Anthropic Messages event
// stream: message_start, content blocks (thinking, text, tool_use) opened
// one at a time and numbered from 0 with their deltas and stops, ping,
// error, message_delta and message_stop. The local /v1/messages stream and
// the remote front's translation of a remote engine's chat chunks both
// write through it, so that the two cannot frame differently.
//
// It writes events through an EventWriter (the server's SSE writer); it
// does not own the HTTP response.
package anthropicsse
