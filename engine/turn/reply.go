package turn

import (
	"context"
	"strings"
)

// Reply is a whole reply, gathered from its pieces (for an answer that is
// not streamed, or a record of one that was).
type Reply struct {
	Reasoning string
	Text      string
	// Calls are the reply's tool calls, whole, by Index.
	Calls  []Call
	Tokens []Token
	// End is how the turn ended (zero until the last piece).
	End End
}

// Add adds a piece to the reply: its text, its tokens, its calls (a part
// of a call joins the call of its Index) and its end.
func (r *Reply) Add(p Piece) {
	r.Reasoning += p.Reasoning
	r.Text += p.Text
	r.Tokens = append(r.Tokens, p.Tokens...)
	for _, c := range p.Calls {
		i := r.call(c.Index)
		if i < 0 {
			r.Calls = append(r.Calls, c)
			continue
		}
		have := &r.Calls[i]
		if have.ID == "" {
			have.ID = c.ID
		}
		if have.Name == "" {
			have.Name = c.Name
		}
		have.Arguments += c.Arguments
	}
	if p.End != nil {
		r.End = *p.End
	}
}

func (r *Reply) call(index int) int {
	for i, c := range r.Calls {
		if c.Index == index {
			return i
		}
	}
	return -1
}

// Collect reads st to its end and returns the whole reply; it closes st.
// Idle pieces are skipped.
func Collect(ctx context.Context, st Stream) (*Reply, error) {
	defer st.Close()
	r := &Reply{}
	for {
		p, err := st.Next(ctx)
		if err != nil {
			return nil, err
		}
		r.Add(p)
		if p.End != nil {
			return r, nil
		}
	}
}

// Text joins the visible text of pieces (a test's or a log's view).
func Text(pieces []Piece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}
