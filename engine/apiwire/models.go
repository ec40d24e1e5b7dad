package apiwire

import "net/http"

// AnthropicVersionHeader is the header every request of Anthropic's SDKs
// carries; a model listing that has it answers in Anthropic's shape.
const AnthropicVersionHeader = "Anthropic-Version"

// WantsAnthropic reports whether r is an Anthropic client's (it carries
// the anthropic-version header): /v1/models, which both APIs share,
// answers it in Anthropic's shape.
func WantsAnthropic(r *http.Request) bool { return r.Header.Get(AnthropicVersionHeader) != "" }

// WriteModelError answers a model listing's error e in the envelope the
// client speaks: Anthropic's for an Anthropic client (WantsAnthropic),
// else the path's.
func WriteModelError(w http.ResponseWriter, r *http.Request, e *Error) {
	if !WantsAnthropic(r) {
		WriteError(w, r.URL.Path, e)
		return
	}
	WriteJSON(w, e.Status, e.Anthropic())
}
