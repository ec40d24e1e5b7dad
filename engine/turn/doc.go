// Package turn owns the canonical chat turn: the one internal request
// every API translates to (Request: messages or a raw prompt, tools and
// the tool choice, sampling, stops, limits, a JSON format, a reply to go
// on from) and the one stream of output pieces every API translates from
// (Piece: reasoning, text, tool calls, the tokens, keep-alives, and last
// the End: finish reason, stop sequence, the model, usage).
//
// An Engine runs turns: the local engine (engine/local) renders the
// conversation with the model's template and generates on the scheduler;
// the remote front (engine/remotefront) sends it to a remote server's chat
// API. Both are also a Counter (a prompt's length without running it) and
// a Sizer (the context a prompt and its reply share). The API packages
// (engine/api/...) and engine/server see only this interface, so each API
// is one translation, the same whichever engine answers; neither engine
// calls back into the other or into an API. Writer and Pump are the shape
// of a streamed answer: an API's stream writes each piece as it comes.
//
// # Design
//
// A turn is a job of the engine, not of the HTTP request that asked for
// it. Submit's context bounds the job (end it, or Close the stream, and
// the turn is cancelled); Next's context bounds only one wait, and an
// ended wait leaves the turn running. So a turn may outlive the page that
// started it: submit it under a context of your own (the app's, not the
// request's), read its pieces from a goroutine of your own, keep them as
// they come (Reply.Add gathers them; the tokens are in each piece), and
// let any number of readers follow what you kept. To end a turn with an
// answer for its client rather than as a client that left, cancel its
// context with an *apiwire.Error as the cause (Stopped; a stopping server
// does, with apiwire.ShuttingDown). The stream is read by
// one goroutine; an Idle piece comes each keep-alive interval the engine
// waits (a queue, a long prefill), so a reader that forwards pieces can
// keep its own client alive, and one that does not skips them. Stream.ID
// is the id the engine's status and events carry for the turn.
//
// A Request is plain data (it encodes as JSON): a retry submits the same
// Request again; a continuation submits it with Continue set to the
// reply's tokens so far, and gets what follows (the prompt cache makes the
// shared prefix cheap; a remote engine refuses it). Refusals are typed: an
// *apiwire.Error (its Status says whether a retry can help: 429 and 503
// carry RetryAfter), or a *ContextError, whose Prompt and Limit say by how
// much to shorten the conversation (Sizer says the context up front, and
// Counter measures a conversation before it is sent). A turn that fails
// after it started ends with Next's error instead of an End; the pieces
// before it stand.
package turn
