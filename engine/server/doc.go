// Package server owns Spool's local HTTP API: the OpenAI chat completions,
// completions and Responses endpoints (and the Responses WebSocket mode),
// embeddings (OpenAI's and Ollama's), the Anthropic messages endpoint,
// Ollama's native API (/api/...), model listing, health and stats,
// server-sent event streaming, the websocket that pushes live engine
// events to the UI. One route table (endpoints in server.go) serves both
// modes; the transport guards in front of it (loopback bind, API key,
// DNS-rebinding guard, CORS, connection and body limits) are
// engine/httpguard's; the error envelopes, the JSON answer writer and the
// server-sent event writer are engine/apiwire's.
//
// Each endpoint translates its request into a turn (engine/turn) and the
// turn's pieces back into its answer. The local engine (engine/local)
// runs the turns: the template, the limits, the scheduler, the GLM
// dialect. A server built with NewRemote runs no engine: the remote
// column of the route table is engine/remotefront's, which forwards to a
// remote engine (vLLM, SGLang, another Spool) and translates /v1/messages
// to its chat API; this package decodes and checks the Anthropic request
// for it.
package server
