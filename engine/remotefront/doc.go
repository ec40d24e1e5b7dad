// Package remotefront owns Spool's remote front: the API's endpoints
// answered by forwarding to a remote engine (vLLM, SGLang, another Spool)
// instead of running one, as `spool serve --remote` does.
//
// A Front passes the OpenAI endpoints through (proxy.go: chat completions,
// completions, Responses, embeddings, with the model resolved to one the
// remote serves and the stream's usage asked for so that the reply's
// figures are known), lists the remote's models, answers /stats with the
// remote's state, and runs turns (engine/turn) on the remote's chat API:
// it is a turn.Engine and a turn.Counter, as the local engine is
// (turns.go, messages.go: a turn into the remote's chat request, its
// answer back into pieces, whole or streamed, tool calls in the parts the
// remote sends them; counting with the remote's /tokenize). An API's
// translation (Anthropic's Messages) is the same for either engine.
// Remote failures are answered as the gateway's (502, 503, 504) or, for
// the remote's own 4xx, as the remote worded them.
//
// engine/server builds a Front in NewRemote and routes the remote column
// of its one route table to it. remotefront does not import engine/server
// nor the local engine (internal/layering says so); the client of the
// remote is engine/remote's.
package remotefront
