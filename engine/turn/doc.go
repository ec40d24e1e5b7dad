// Package turn owns the canonical chat turn: the one internal request
// every API translates to (Request: messages or a raw prompt, tools and
// the tool choice, sampling, stops, limits, a JSON format) and the one
// stream of output pieces every API translates from (Piece: reasoning,
// text, tool calls, the tokens, keep-alives, and last the End: finish
// reason, stop sequence, usage).
//
// An Engine runs turns. The local engine (engine/local) renders the
// conversation with the model's template and generates on the scheduler;
// the remote front (engine/remotefront) sends it to a remote server's chat
// API. The API packages (engine/api/...) and engine/server see only this
// interface, so each API is one translation, the same whichever engine
// answers; neither engine calls back into the other or into an API.
//
// # Design
//
// A turn is a job of the engine, not of the HTTP request that asked for
// it. Submit's context bounds the job (end it, or Close the stream, and
// the turn is cancelled); Next's context bounds only one wait. So a turn
// may outlive the page that started it: submit it under a context of
// your own, read its pieces from a goroutine of your own and keep them
// (Reply gathers them), and let any number of readers follow what you
// kept. The stream is read by one goroutine; a keep-alive (an Idle piece)
// comes every keep-alive interval the engine waits, so a reader that
// forwards pieces can keep its own client alive through a long prefill.
//
// A Request is plain data (it encodes as JSON): a retry submits the same
// Request again, and a continuation submits one whose Messages end with
// the reply so far. Refusals are typed: an *apiwire.Error (its Status
// says whether a retry can help: 429 and 503 carry RetryAfter), or a
// *ContextError, whose Prompt and Limit say by how much to shorten the
// conversation. A turn that fails after it started ends with Next's error
// instead of an End.
package turn
