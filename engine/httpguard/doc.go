// Package httpguard owns the transport hardening in front of Spool's HTTP
// API, whichever engine answers behind it (local or remote): the
// connection cap with overflow answers and request-framing checks
// (conns.go), the DNS-rebinding guard, CORS and the API key
// (security.go), the body size limit and the pre-scan that refuses a
// conversation longer than the context before it is decoded (prescan.go),
// and the bound on requests parsed at once (limits.go).
//
// It knows no protocol: a refusal is an *apiwire.Error (the error every
// API front answers) that the API renders in its own envelope
// (Config.WriteError), and the API says which paths carry a conversation
// (Config.Conversation). engine/server builds one Guard per server.
package httpguard
