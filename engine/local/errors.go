package local

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/turn"
)

// schedulerError is a scheduler's refusal as answered to a client.
func schedulerError(err error) error {
	var ce *kvcache.ContextError
	var re *experts.ReadError
	switch {
	case errors.Is(err, scheduler.ErrQueueFull):
		return &apiwire.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
			Message: "the server is busy: every generation slot is taken and the queue is full; retry later", RetryAfter: 1}
	case errors.Is(err, scheduler.ErrClosed):
		return apiwire.ShuttingDown()
	case errors.As(err, &ce):
		return &turn.ContextError{Prompt: ce.Have + ce.Add, Limit: ce.Limit}
	case errors.As(err, &re):
		return expertUnreadable(re)
	}
	return err
}

// engineError maps the engine's failure of a generation: a model file it
// could not read intact, else an internal error.
func engineError(err error) *apiwire.Error {
	var re *experts.ReadError
	if errors.As(err, &re) {
		return expertUnreadable(re)
	}
	return apiwire.Internal(err)
}

// expertUnreadable reports a routed expert the engine could not read
// intact: the model's files (named in the model's directory, no local
// path) are at fault, not the request.
func expertUnreadable(re *experts.ReadError) *apiwire.Error {
	e := &apiwire.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "model_read_failed", Cause: re,
		Message: fmt.Sprintf("the model's file %s could not be read (layer %d, expert %d): a disk or file system error", re.File, re.Layer, re.Expert)}
	if re.Damaged() {
		e.Code = "model_file_damaged"
		e.Message = fmt.Sprintf("the model's file %s is damaged (layer %d, expert %d: its bytes are not those the model was opened with); download the model again", re.File, re.Layer, re.Expert)
	}
	return e
}
