// Package apiwire owns the wire shapes that Spool's API fronts share: the
// error answered to a client (Error) with its OpenAI, Anthropic and
// Ollama envelopes and the choice among them by path (WriteError), the
// JSON answer writer, the server-sent event stream writer (SSE), and an
// Anthropic Messages reply with its stop reason (AnthropicReply,
// AnthropicStop; the stream's framing is engine/anthropicsse's).
//
// engine/server's protocol handlers and engine/remotefront use it, and
// engine/httpguard's refusals are its Errors; it knows nothing of the
// engine or the scheduler.
package apiwire
