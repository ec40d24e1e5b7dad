// Package standin is a small OpenAI-compatible server that behaves as vLLM
// does where vLLM differs from OpenAI, for tests of Spool's remote engine
// (it generates no real text):
//
//   - errors are {"object":"error","message","type":"BadRequestError","param","code":400},
//     a bad key is 401 {"error":"Unauthorized"} and an unknown route is
//     FastAPI's 404 {"detail":"Not Found"};
//   - /v1/models entries carry max_model_len and root;
//   - reasoning streams in the "reasoning" field;
//   - a tool call streams as a first delta with its id and name and then
//     its arguments in several deltas carrying only the index;
//   - usage comes in a last chunk with empty choices, only with
//     stream_options.include_usage; choices carry stop_reason;
//   - a prompt over max_model_len is a 400 naming the maximum context
//     length; POST /tokenize counts a prompt.
//
// What it answers is scripted by directives in the last user message:
// [[status N]] answers error status N, [[sleep 2s]] waits before answering,
// [[stall]] sends a first chunk and then nothing until the client leaves,
// [[cut]] breaks the connection mid-stream, [[stream-error]] sends an error
// event mid-stream, [[think]] reasons first, [[two-tools]] calls two tools,
// [[comments]] sends a comment and an event without data (each with its
// blank line) before every chunk of a chat stream.
// Otherwise it replies "You said: <text>" word by word, or calls the first
// (or the forced) tool when tools are given, or reports a tool's result.
package standin
