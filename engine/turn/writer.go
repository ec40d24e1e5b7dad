package turn

import "context"

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
// written it, unless ctx ended: the client is gone) or w's.
func Pump(ctx context.Context, st Stream, w Writer) (*End, error) {
	defer st.Close()
	for {
		p, err := st.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
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
