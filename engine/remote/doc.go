// Package remote owns Spool's client of a remote engine: an
// OpenAI-compatible inference server such as vLLM, SGLang or another
// Spool, reached over HTTP(S) with an optional bearer key.
//
// A Client sends requests to the remote (adding the remote's key, which
// never leaves this package: every error field, answer header, body,
// stream event and model list is cleaned of it in one place, redact.go,
// as written and as JSON escapes spell it), reads
// its answers (error bodies in the shapes vLLM, SGLang, FastAPI and OpenAI
// use; server-sent event streams with an idle timeout), lists its models
// (with vLLM's max_model_len), probes whether it is reachable and how long
// a round trip takes, and keeps the figures of the replies that passed
// through it (tokens and rates from the remote's own usage).
//
// It does not speak Spool's API: engine/remotefront proxies and translates
// requests with it.
package remote
