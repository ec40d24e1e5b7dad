package server

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/scheduler"
)

// turn is one prepared generation, shared by every endpoint.
type turn struct {
	id     string
	prompt []int
	req    scheduler.Request
	// stops are stop strings matched on the generated text.
	stops []string
	// chat splits <think> reasoning from content; inThink is the state
	// the prompt leaves the model in.
	chat    bool
	inThink bool
	// tools, when set, turns <tool_call> markup into tool calls; prefix
	// is markup already written into the prompt (a forced tool choice).
	tools  []chat.Tool
	parse  bool
	prefix string
}

// piece is what one step of a generation adds.
type piece struct {
	reasoning string
	content   string
	calls     []chat.ToolCall
	// tokens are the tokens consumed for this piece (for logprobs).
	tokens []scheduler.Token
}

// outcome is how a generation ended.
type outcome struct {
	// finish is stop, length or tool_calls.
	finish string
	// stopString is the stop string that ended it, if any.
	stopString string
	// completion counts the tokens that made the output.
	completion int
	res        *scheduler.Result
	calls      int
}

// submit queues a turn; the UI's status follows it from here.
func (s *Server) submit(ctx context.Context, t *turn) (*scheduler.Stream, error) {
	httpguard.EndParsing(ctx)
	if s.stop.stopping() {
		return nil, shuttingDown()
	}
	s.beginRequest(ctx, t)
	st, err := s.eng.Scheduler.Submit(ctx, t.req)
	if err != nil {
		s.endRequest(t.id, nil, scheduler.FinishError)
		return nil, asAPIError(err)
	}
	if !s.stop.add(st, streamFlight(st)) { // the server began to stop meanwhile
		st.Cancel()
		s.endRequest(t.id, nil, scheduler.FinishCancelled)
		return nil, shuttingDown()
	}
	return st, nil
}

// abandon ends a submitted turn whose answer could not begin (its client
// left while the first bytes were written).
func (s *Server) abandon(t *turn, st *scheduler.Stream) {
	st.Cancel()
	s.stop.done(st)
	s.endRequest(t.id, nil, scheduler.FinishCancelled)
}

// startTurn decodes a request body into req, builds its turn and submits
// it: the start every generating endpoint shares. On an error it has
// answered the client and returns ok false.
func startTurn[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, build func(*R) (*turn, error)) (t *turn, st *scheduler.Stream, ok bool) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	t, err := build(req)
	if err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	if st, err = s.submit(r.Context(), t); err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	return t, st, true
}

// reply is a whole generation, gathered for a non-streaming answer.
type reply struct {
	reasoning, content string
	calls              []chat.ToolCall
	tokens             []scheduler.Token
}

// generateReply runs a turn to its end and gathers its pieces. On an error
// it has answered the client (unless the client left) and returns ok false.
func (s *Server) generateReply(w http.ResponseWriter, r *http.Request, t *turn, st *scheduler.Stream) (*reply, *outcome, bool) {
	var reasoning, content strings.Builder
	rep := &reply{}
	o, err := s.generate(r.Context(), t, st, func(p piece) error {
		reasoning.WriteString(p.reasoning)
		content.WriteString(p.content)
		rep.calls = append(rep.calls, p.calls...)
		rep.tokens = append(rep.tokens, p.tokens...)
		return nil
	}, nil)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, r, err)
		}
		return nil, nil, false
	}
	rep.reasoning, rep.content = reasoning.String(), content.String()
	return rep, o, true
}

// generate reads a turn's stream to the end, turning tokens into pieces
// for onPiece; onIdle is called every KeepAlive while nothing arrives. An
// error from either callback cancels the generation.
func (s *Server) generate(ctx context.Context, t *turn, st *scheduler.Stream, onPiece func(piece) error, onIdle func() error) (_ *outcome, err error) {
	defer s.stop.done(st)
	defer st.Cancel()
	out := &outcome{}
	defer func() {
		finish := finishOf(out, err)
		s.endRequest(t.id, out.res, finish)
		recordOf(ctx).setTokens(s.cfg.ModelID, len(t.prompt), out.completion, finish)
	}()
	dec := s.eng.Tokenizer.NewStreamDecoder(true)
	stops := &stopMatcher{stops: t.stops}
	var split *chat.ReasoningSplitter
	if t.chat {
		split = chat.SplitReasoning(t.inThink)
	}
	var tools *toolStream
	if t.parse {
		tools = &toolStream{tools: t.tools, forced: t.prefix != ""}
		if t.prefix != "" {
			tools.write(t.prefix)
		}
	}
	// process turns text into a piece and hands it on; final marks the
	// last piece, cut a generation that ran out of tokens.
	process := func(text string, toks []scheduler.Token, final, cut bool) error {
		p := piece{tokens: toks}
		content := text
		if split != nil {
			r, c := split.Write(text)
			if final {
				fr, fc := split.Flush()
				r, c = r+fr, c+fc
			}
			p.reasoning, content = r, c
		}
		if tools != nil {
			c, calls := tools.write(content)
			if final {
				fc, fcalls := tools.flush(cut)
				c += fc
				calls = append(calls, fcalls...)
			}
			content = c
			for _, pc := range calls {
				id, err := chat.NewCallID(rand.Reader)
				if err != nil {
					return err
				}
				p.calls = append(p.calls, pc.ToolCall(id))
			}
			out.calls += len(calls)
		}
		p.content = content
		if p.reasoning == "" && p.content == "" && len(p.calls) == 0 && len(p.tokens) == 0 {
			return nil
		}
		if s.hub.active() && (p.reasoning != "" || p.content != "") {
			s.hub.publish(Event{Type: "token", Data: map[string]string{"id": t.id, "content": p.content, "reasoning": p.reasoning}})
		}
		return onPiece(p)
	}

	var res *scheduler.Result
	for res == nil {
		wait, cancel := context.WithTimeout(ctx, s.cfg.KeepAlive)
		toks, r, err := st.Next(wait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				if onIdle != nil {
					if err := onIdle(); err != nil {
						return nil, err
					}
				}
				continue
			}
			return nil, err
		}
		res = r
		var text string
		var used []scheduler.Token
		for _, tk := range toks {
			out.completion++
			used = append(used, tk)
			emit, hit := stops.write(dec.Add(tk.ID))
			text += emit
			if hit != "" {
				out.stopString = hit
				break
			}
		}
		s.addTokens(t.id, len(used))
		if out.stopString != "" {
			st.Cancel()
			if err := process(text, used, true, false); err != nil {
				return nil, err
			}
			res = drain(ctx, st)
			break
		}
		if res != nil {
			text += stops.end(dec.Flush())
		}
		if err := process(text, used, res != nil, res != nil && res.FinishReason == scheduler.FinishLength); err != nil {
			return nil, err
		}
	}
	out.res = res
	switch {
	case res == nil:
		return nil, ctx.Err()
	case out.stopString != "":
		out.finish = "stop"
	case res.FinishReason == scheduler.FinishError:
		return nil, engineError(res.Err)
	case res.FinishReason == scheduler.FinishCancelled:
		return nil, s.cancelled(ctx)
	case res.FinishReason == scheduler.FinishLength:
		out.finish = "length"
	default:
		out.finish = "stop"
	}
	if out.calls > 0 && out.finish == "stop" {
		out.finish = "tool_calls"
	}
	return out, nil
}

// finishOf is how a generation ended, for the UI's status.
func finishOf(o *outcome, err error) string {
	switch {
	case err == nil:
		return o.finish
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return scheduler.FinishCancelled
	}
	return scheduler.FinishError
}

// end flushes the decoder's tail through the matcher and releases
// whatever it still holds: generation is over, so no stop can complete.
func (m *stopMatcher) end(tail string) string {
	out, hit := m.write(tail)
	if hit != "" {
		return out
	}
	return out + m.flush()
}

// drain waits for a cancelled stream's result.
func drain(ctx context.Context, st *scheduler.Stream) *scheduler.Result {
	for {
		_, res, err := st.Next(ctx)
		if err != nil || res != nil {
			return res
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
