package turn

import (
	"context"
	"errors"

	"github.com/spoolhq/spool/engine/apiwire"
)

// Writer is an API's answer to a turn written as the turn runs (a stream
// in the API's shape).
type Writer interface {
	// Piece writes a piece: output, a keep-alive (Idle) or the last
	// piece (End).
	Piece(p Piece) error
	// Fail ends the answer with the error that ended the turn.
	Fail(err error) error
}

// Pump reads st into w until the turn ends, and closes st. It returns the
// turn's end, or the error that ended it: the turn's (after w.Fail has
// written it, unless the client is gone: ctx ended without a Stopped
// answer) or w's.
func Pump(ctx context.Context, st Stream, w Writer) (*End, error) {
	defer st.Close()
	for {
		p, err := st.Next(ctx)
		if err != nil {
			if e := Stopped(ctx); e != nil {
				err = e
			}
			if !ClientGone(ctx) {
				w.Fail(err)
			}
			return nil, err
		}
		if err := w.Piece(p); err != nil {
			return nil, err
		}
		if p.End != nil {
			return p.End, nil
		}
	}
}

// Stopped is the answer ctx's end carries: the *apiwire.Error it was
// cancelled with (context.WithCancelCause), or nil. A server that stops
// ends the turns in flight so, and their clients are told it (a 503
// before the answer began, the stream's error event after); a context
// that ended otherwise is a client that left.
func Stopped(ctx context.Context) *apiwire.Error {
	if ctx.Err() == nil {
		return nil
	}
	var e *apiwire.Error
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}

// ClientGone reports whether ctx ended because its client left: nobody
// reads an answer (not even an error).
func ClientGone(ctx context.Context) bool { return ctx.Err() != nil && Stopped(ctx) == nil }
