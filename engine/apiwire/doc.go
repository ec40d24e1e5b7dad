// Package apiwire owns the wire shapes that Spool's API fronts share: the
// error answered to a client (Error) with its OpenAI, Anthropic and
// Ollama envelopes and the choice among them by path (WriteError), the
// JSON request decoder and answer writer, and the server-sent event
// stream writer (SSE).
//
// The API packages (engine/api/...), engine/server and engine/remotefront
// use it, and engine/httpguard's refusals are its Errors; it knows nothing
// of the engine, the scheduler or a turn.
package apiwire
