package turn

import (
	"context"
	"errors"
)

// Engine runs turns: the local engine (engine/local) on the model in this
// process, and the remote front (engine/remotefront) on a remote server.
type Engine interface {
	// Submit checks req and starts it. An error is its refusal (an
	// *apiwire.Error, a *ContextError; Error words any of them). ctx
	// bounds the turn: when it ends, the turn is cancelled. The caller
	// reads the stream to its end, or closes it.
	Submit(ctx context.Context, req *Request) (Stream, error)
}

// Counter counts the tokens of a turn's prompt without running it
// (Anthropic's count_tokens). A prompt over the context is counted (up to
// a few contexts), not refused.
type Counter interface {
	CountTokens(ctx context.Context, req *Request) (int, error)
}

// Sizer is an engine that knows its context: the tokens a turn's prompt
// and its reply share (0: not known).
type Sizer interface {
	Context() int
}

// Stream is one running turn. It is read by one goroutine.
type Stream interface {
	// ID is the turn's id, Model the model answering.
	ID() string
	Model() string
	// PromptTokens is the prompt's length, or -1 where the engine knows it
	// only at the end (a remote engine: End's usage has it).
	PromptTokens() int
	// Next waits for the turn's next piece: output, an Idle piece after
	// the engine's keep-alive interval without any, or the last piece,
	// which has End set. After the last, Next returns ErrEnded. An error
	// ends the turn: its cause (the cause of Submit's ctx when the turn
	// was cancelled: context.Cause, an *apiwire.Error for a turn a server
	// stopped, see Stopped), or an *apiwire.Error. Next's own ctx bounds
	// the wait alone (the turn goes on).
	Next(ctx context.Context) (Piece, error)
	// Close ends the turn, cancelling it if it still runs. It is safe to
	// call more than once, and after the end.
	Close()
}

// ErrEnded is Next's error after the last piece.
var ErrEnded = errors.New("turn: the turn has ended")
