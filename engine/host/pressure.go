package host

import (
	"context"

	"github.com/spoolhq/spool/engine/pressure"
	"github.com/spoolhq/spool/native/mempressure"
)

// watchPressure lets the engine's expert cache and the prompt cache's
// memory tier give way under the system's memory pressure until the
// engine closes (engine/pressure).
func (e *Engine) watchPressure(ctx context.Context) *pressure.Governor {
	var g *pressure.Governor
	if e.PromptCache != nil {
		g = pressure.New(e.Experts, e.PromptCache)
	} else {
		g = pressure.New(e.Experts, nil)
	}
	g.Apply(mempressure.Normal) // the planned sizes, in Stats
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Watch(ctx)
	}()
	e.closers.push(func() error { cancel(); <-done; return nil })
	return g
}
