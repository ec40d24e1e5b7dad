//go:build !headless

package main

import (
	"context"
	"log"

	"fyne.io/systray"

	"github.com/spoolhq/spool/engine/remote"
)

// addEngineMenu adds the menu bar's engine item, "Engine: this Mac" or
// "Engine: gpu-box:8000 · 12 ms · 41.3 tok/s", with the choices This Mac
// and A server. Choosing saves the setting and restarts the engine; "A
// server" without a saved one opens the Settings page. Its loop runs
// until the tray stops.
func (t *tray) addEngineMenu() {
	item := systray.AddMenuItem("Engine: this Mac", "Where replies are generated")
	local := item.AddSubMenuItemCheckbox("This Mac", "Run the model on this Mac", true)
	server := item.AddSubMenuItemCheckbox("A server", "Forward to the vLLM or SGLang server saved in Settings", false)
	go func() {
		// The item follows the saved settings and the engine's status
		// board (the remote's reachability is on it).
		saved, stopSaved := t.rt.settings.Changes()
		defer stopSaved()
		changed, stop := t.rt.engine.Board().Subscribe()
		defer stop()
		var last engineMenuView
		for {
			s, _, err := t.rt.settings.Load()
			if err != nil {
				s = appSettings{}
			}
			var rs *remote.Status
			if st, ok := t.rt.engine.remoteStatus(); ok {
				rs = &st
			}
			v := engineMenu(s, t.rt.engine.Status(), rs)
			if v != last {
				last = v
				item.SetTitle(v.Title)
				server.SetTitle(v.ServerTitle)
				if v.Local {
					local.Check()
				} else {
					local.Uncheck()
				}
				if v.Server {
					server.Check()
				} else {
					server.Uncheck()
				}
			}
			select {
			case <-t.done:
				return
			case <-saved:
			case <-changed:
			case <-local.ClickedCh:
				t.chooseEngine(engineLocal)
			case <-server.ClickedCh:
				if !v.ServerSet {
					t.showWindow()
					continue
				}
				t.chooseEngine(engineRemote)
			}
		}
	}()
}

// chooseEngine saves the engine choice and restarts the engine with it.
// The change is made to the settings as saved now, not to the copy the
// menu last showed: an edit made meanwhile (the Settings page) is kept.
func (t *tray) chooseEngine(kind string) {
	changed := false
	_, _, err := t.rt.settings.Update("", func(s *appSettings) error {
		if s.Engine == kind || (s.Engine == "" && kind == engineLocal) {
			return errSettingsUnchanged
		}
		s.Engine, changed = kind, true
		return s.checkEngine()
	})
	if err != nil {
		log.Printf("spool: engine: %v", err)
		return
	}
	if !changed {
		return
	}
	if err := t.rt.restart(context.Background()); err != nil {
		log.Printf("spool: engine: %v", err)
	}
}
