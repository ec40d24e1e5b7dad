// Package remotefront owns Spool's remote front: the API's endpoints
// answered by forwarding to a remote engine (vLLM, SGLang, another Spool)
// instead of running one, as `spool serve --remote` does.
//
// A Front passes the OpenAI endpoints through (proxy.go: chat completions,
// completions, Responses, embeddings, with the model resolved to one the
// remote serves and the stream's usage asked for so that the reply's
// figures are known), lists the remote's models, answers /stats with the
// remote's state, and translates Anthropic's /v1/messages and
// count_tokens to the remote's chat API and back (messages.go,
// messagesstream.go: thinking, text and tool_use blocks, stop reasons,
// usage, the stream's events through engine/anthropicsse). Remote
// failures are answered as the gateway's (502, 503, 504) or, for the
// remote's own 4xx, as the remote worded them.
//
// engine/server builds a Front in NewRemote and routes the remote column
// of its one route table to it; the server decodes and checks the
// Anthropic request (Config.Messages), since that is its protocol code,
// and keeps the remote's state in its status and events. remotefront
// does not import engine/server; the client of the remote is
// engine/remote's.
package remotefront
