package turn

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
)

// ContextError refuses a prompt the context cannot hold. Each API words
// it its way (Anthropic's "prompt is too long", which Claude Code acts
// on); Error gives the wording the others share.
type ContextError struct {
	// Prompt is the prompt's length in tokens; AtLeast says counting
	// stopped there (it is longer).
	Prompt  int
	AtLeast bool
	// Limit is the context: the engine's, or the request's own when
	// Requested (Request.Context).
	Limit     int
	Requested bool
}

func (e *ContextError) Error() string {
	if e.AtLeast {
		return fmt.Sprintf("the prompt has more than %d tokens, over the context of %d", e.Prompt-1, e.Limit)
	}
	return fmt.Sprintf("the prompt has %d tokens, over the context of %d", e.Prompt, e.Limit)
}

// APIError is e as answered to a client.
func (e *ContextError) APIError() *apiwire.Error {
	if e.AtLeast {
		return apiwire.ContextLength(e.Limit, "the prompt has more than %d tokens", e.Prompt-1)
	}
	return apiwire.ContextLength(e.Limit, "the prompt has %d tokens", e.Prompt)
}

// Error is err as answered to a client: an *apiwire.Error as it is, a
// *ContextError in its shared wording, a request body over the limit as
// a 413, a context's end as the client having left (499, logged only),
// anything else as an internal error.
func Error(err error) *apiwire.Error {
	var ae *apiwire.Error
	var ce *ContextError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ce):
		return ce.APIError()
	case errors.As(err, &mb):
		return apiwire.BodyError(mb)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return apiwire.ClientClosed(err)
	}
	return apiwire.Internal(err)
}
