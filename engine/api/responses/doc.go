// Package responses is OpenAI's Responses API (POST /v1/responses, GET
// /v1/responses/{id}) and its WebSocket mode, as translations: the request
// and its input items into a turn (engine/turn), with its tools flattened
// to functions (namespaces, custom tools; hosted tools left out) and
// previous_response_id continued from a Store; the turn's pieces back into
// the response's output items, whole or as the stream of events (Answer);
// the WebSocket mode's frames into requests and the stream back into frames
// (Socket). engine/server routes the requests and runs the turns.
package responses
