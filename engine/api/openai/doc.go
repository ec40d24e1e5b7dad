// Package openai is OpenAI's chat completions, completions, embeddings and
// model listing, as translations: each request's wire type, its check and
// translation into a turn (engine/turn), and the turn's pieces back into
// the whole answer or its server-sent event stream. It knows no engine
// and serves no HTTP: engine/server routes the requests, decodes them and
// runs the turns. Its request pieces (sampling, response_format,
// tool_choice, reasoning_effort, stop) are shared with the Responses API
// (engine/api/responses).
package openai
