package server

import (
	"context"
	"errors"
	"time"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remotefront"
)

// A server built with NewRemote runs no engine: it forwards to a remote
// one (vLLM, SGLang, another Spool) through an engine/remotefront Front,
// which answers the endpoints of the route table's remote column and runs
// the turns of /v1/messages (a turn.Engine). This file holds the server's
// side: building the front, and the remote's state in Status and on the
// events websocket. The security defaults are New's.

// NewRemote builds a server that forwards to the remote engine rc. The
// caller runs rc.Run, which keeps the reachability shown in /stats and on
// the events websocket current.
func NewRemote(cfg Config, rc *remote.Client) (*Server, error) {
	if rc == nil {
		return nil, errors.New("server: a remote server needs a remote engine")
	}
	cfg = cfg.withDefaults()
	if err := CheckBind(cfg.Host, cfg.APIKey); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		ids:     append([]string{cfg.ModelID, "spool"}, cfg.Aliases...),
		created: time.Now().Unix(),
		hub:     newHub(),
		board:   cfg.Status,
		remote:  rc,
		log:     cfg.Logger,
		health:  &access.Health{},
		stop:    newStopper(),
	}
	s.board.Serve("", rc)
	front, err := remotefront.New(remotefront.Config{Client: rc, Names: s.ids, MaxTokens: cfg.MaxTokens, KeepAlive: cfg.KeepAlive})
	if err != nil {
		return nil, err
	}
	s.front, s.turns, s.counter = front, front, front
	s.guard = s.newGuard()
	s.handler = s.guard.Handler(s.routes())
	return s, nil
}

// RemoteStatus is the remote engine's state; ok is false for a server
// that runs its own engine.
func (s *Server) RemoteStatus() (st remote.Status, ok bool) {
	if s.remote == nil {
		return remote.Status{}, false
	}
	return s.remote.Status(), true
}

// followRemote passes the remote engine's status changes on to the status
// board and the events websocket until ctx ends.
func (s *Server) followRemote(ctx context.Context) {
	changed, stop := s.remote.Changes()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			s.board.Changed()
			s.publishState()
		}
	}
}

// remoteHelloEvent is the first event: the remote's default model, the
// engine kind and the remote's reachability.
func (s *Server) remoteHelloEvent() Event {
	st := s.remote.Status()
	hello := map[string]any{"id": defaultModelID(st), "object": "model"}
	if len(st.Models) > 0 {
		hello = remotefront.ModelObject(st.Models[0])
	}
	hello["engine"] = "remote"
	hello["remote"] = s.Status().Remote
	return Event{Type: "hello", Data: hello}
}

func defaultModelID(st remote.Status) string {
	if len(st.Models) > 0 {
		return st.Models[0].ID
	}
	return ""
}
