// Package ollama is Ollama's native API (/api/chat, /api/generate,
// /api/embed and /api/embeddings, /api/tags, /api/show, /api/ps,
// /api/version, /api/pull) as translations: each request's wire type, its
// check and translation into a turn (engine/turn), and the turn's pieces
// back into the whole answer or its NDJSON stream (Answer), with Ollama's
// timings in nanoseconds; the listings of the served model (Served). It
// knows no engine and serves no HTTP: engine/server routes the requests
// and runs the turns.
package ollama
