// Package access keeps the access record of a request: the one log record
// the API writes when a request ends (Message: endpoint, status, duration,
// client, user agent, model, tokens, finish, and the cause of a server
// error), and the engine's health that the internal errors among them
// degrade (/health). Handler gives every request a Record in its context;
// whoever answers a request (engine/server's glue, the remote front's
// proxy) notes in it what the record should say: the route (SetEndpoint),
// the tokens (SetTokens), an error answered (Fail). A WebSocket's
// responses are records of their own (NewRecord, Log).
//
// Prompt and reply text are never part of a record. Client-chosen strings
// are attribute values, which log/slog's handlers quote, never part of a
// message.
package access
