package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/scheduler"
)

// apiError is an error answered to the client (apiwire.Error).
type apiError = apiwire.Error

// invalid reports a bad request parameter.
func invalid(param, format string, args ...any) *apiError {
	return apiwire.Invalid(param, format, args...)
}

func notFound(code, format string, args ...any) *apiError {
	return apiwire.NotFound(code, format, args...)
}

func forbidden(format string, args ...any) *apiError { return apiwire.Forbidden(format, args...) }

func internalError(err error) *apiError { return apiwire.Internal(err) }

func unavailable(format string, args ...any) *apiError { return apiwire.Unavailable(format, args...) }

func queueFull() *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
		Message: "the server is busy: every generation slot is taken and the queue is full; retry later", RetryAfter: 1}
}

// contextLength refuses a request the context of limit tokens cannot hold;
// the message goes on from "this model's context length is N tokens, but".
func contextLength(limit int, format string, args ...any) *apiError {
	return apiwire.ContextLength(limit, format, args...)
}

func contextExceeded(prompt, limit int) *apiError {
	return contextLength(limit, "the prompt has %d tokens", prompt)
}

// contextExceededAtLeast reports a prompt whose tokenization stopped at
// more than limit tokens.
func contextExceededAtLeast(prompt, limit int) *apiError {
	return contextLength(limit, "the prompt has more than %d tokens", prompt-1)
}

// renderedTooLong refuses a rendered prompt longer than limit tokens can be.
func renderedTooLong(bytes int64, limit int) *apiError {
	return contextLength(limit, "the rendered prompt is longer than %d bytes, more than %d tokens can hold", bytes, limit)
}

// tooManyMessages refuses more messages than the context has tokens.
func tooManyMessages(n, limit int) *apiError { return apiwire.TooManyMessages(n, limit) }

// templateLimit reports a chat template that exceeded a render limit: the
// model's template, not the request, is at fault, but a smaller request
// may pass.
func templateLimit(err error) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Type: "invalid_request_error", Code: "template_limit_exceeded", Param: "messages",
		Message: fmt.Sprintf("the model's chat template exceeded a limit while rendering these messages: %v", err)}
}

// statusClientClosed is the status logged for a request whose client left
// before its answer (nginx's 499).
const statusClientClosed = 499

// expertUnreadable reports a routed expert the engine could not read
// intact: the model's files (named in the model's directory, no local
// path) are at fault, not the request.
func expertUnreadable(re *experts.ReadError) *apiError {
	e := &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "model_read_failed", Cause: re,
		Message: fmt.Sprintf("the model's file %s could not be read (layer %d, expert %d): a disk or file system error", re.File, re.Layer, re.Expert)}
	if re.Damaged() {
		e.Code = "model_file_damaged"
		e.Message = fmt.Sprintf("the model's file %s is damaged (layer %d, expert %d: its bytes are not those the model was opened with); download the model again", re.File, re.Layer, re.Expert)
	}
	return e
}

// engineError maps the engine's failure of a generation: a model file it
// could not read intact, else an internal error.
func engineError(err error) *apiError {
	var re *experts.ReadError
	if errors.As(err, &re) {
		return expertUnreadable(re)
	}
	return internalError(err)
}

// asAPIError maps any error to an apiError.
func asAPIError(err error) *apiError {
	var ae *apiError
	var ce *kvcache.ContextError
	var mb *http.MaxBytesError
	var re *experts.ReadError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &re):
		return expertUnreadable(re)
	case errors.Is(err, scheduler.ErrQueueFull):
		return queueFull()
	case errors.Is(err, scheduler.ErrClosed):
		return shuttingDown()
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The client left (nobody reads the answer): not a failure of
		// the server. 499 is what proxies log for it.
		return &apiError{Status: statusClientClosed, Type: "invalid_request_error", Code: "client_closed_request", Message: "the client closed the request", Cause: err}
	case errors.As(err, &ce):
		return contextExceeded(ce.Have+ce.Add, ce.Limit)
	case errors.As(err, &mb):
		return apiwire.BodyError(mb)
	}
	return internalError(err)
}

// writeError answers err in the envelope of the request's path; a server
// error's cause goes into the request's access record (failed).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiwire.WriteError(w, r.URL.Path, failed(r.Context(), err))
}

// failed maps err to what the client is told, noting a server error in
// the access record of ctx's request (its log line; an internal error
// marks the engine degraded). Every answer of an error goes through it,
// in a body or as a stream's error event.
func failed(ctx context.Context, err error) *apiError {
	e := asAPIError(err)
	recordOf(ctx).fail(e)
	return e
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) { apiwire.WriteJSON(w, status, v) }
