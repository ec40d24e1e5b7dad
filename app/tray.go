//go:build !headless

package main

import (
	"context"
	_ "embed"
	"log"
	"runtime"
	"sync"

	"fyne.io/systray"
	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/spoolhq/spool/engine/status"
)

var (
	//go:embed icons/appicon.png
	appIcon []byte
	//go:embed icons/tray.png
	trayIcon []byte
	//go:embed icons/tray-template.png
	trayTemplateIcon []byte
)

// tray is the menu-bar item: the engine's state, Start/Stop model, Open
// Spool, Copy API URL, Start at login (macOS) and Quit. Its loop runs from
// onReady until stop.
type tray struct {
	rt    *appRuntime
	wails chan context.Context // the Wails context, once the window starts
	end   func()
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	wctx context.Context
}

// startTray registers the tray and starts it on the calling (main)
// goroutine, before wails.Run.
func startTray(rt *appRuntime) *tray {
	t := &tray{rt: rt, done: make(chan struct{})}
	start, end := systray.RunWithExternalLoop(t.onReady, nil)
	t.end = end
	func() {
		// Without a StatusNotifier host (Linux) the tray may fail; the
		// window must not.
		defer func() {
			if r := recover(); r != nil {
				log.Printf("spool: no menu-bar item: %v", r)
			}
		}()
		start()
	}()
	return t
}

// stop ends the loop and the tray (during shutdown only: on macOS the
// tray's end also stops the app's run loop).
func (t *tray) stop() {
	t.once.Do(func() {
		close(t.done)
		defer func() { recover() }()
		t.end()
	})
}

func (t *tray) ctx() context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wctx
}

func (t *tray) showWindow() {
	if ctx := t.ctx(); ctx != nil {
		wailsShow(ctx)
	}
}

func (t *tray) onReady() {
	defer func() {
		if r := recover(); r != nil {
			log.Printf("spool: menu-bar item failed: %v", r)
		}
	}()
	if runtime.GOOS == "darwin" {
		systray.SetTemplateIcon(trayTemplateIcon, trayIcon)
	} else {
		systray.SetIcon(trayIcon)
		systray.SetTitle("Spool")
	}
	systray.SetTooltip("Spool")
	stateItem := systray.AddMenuItem("Stopped", "The engine's state")
	stateItem.Disable()
	systray.AddSeparator()
	toggle := systray.AddMenuItem("Start model", "Load the model and serve it")
	open := systray.AddMenuItem("Open Spool", "Show the window")
	copyURL := systray.AddMenuItem("Copy API URL", "Copy the OpenAI-compatible base URL")
	t.addEngineMenu()
	login := &systray.MenuItem{ClickedCh: make(chan struct{})}
	if loginItemSupported() {
		login = systray.AddMenuItemCheckbox("Start at login", "Open Spool when you log in", loginItemEnabled())
	}
	systray.AddSeparator()
	quit := systray.AddMenuItem("Quit Spool", "Stop the engine and quit")

	var wctx context.Context
	select {
	case wctx = <-t.wails:
	case <-t.done:
		return
	}
	t.mu.Lock()
	t.wctx = wctx
	t.mu.Unlock()
	// The line follows the engine's status board: it turns to ready the
	// moment a reply ends.
	changed, stop := t.rt.engine.Board().Subscribe()
	defer stop()
	last := ""
	for {
		st := t.rt.engine.Status()
		var srv *status.Status
		if s, ok := t.rt.engine.serverStatus(); ok {
			srv = &s
		}
		if line := statusLine(st, srv); line != last {
			last = line
			stateItem.SetTitle(line)
			if t.rt.engine.Running() {
				toggle.SetTitle("Stop model")
			} else {
				toggle.SetTitle("Start model")
			}
		}
		select {
		case <-t.done:
			return
		case <-changed:
		case <-toggle.ClickedCh:
			if t.rt.engine.Running() {
				go t.rt.engine.Stop()
			} else if err := t.rt.restart(context.Background()); err != nil {
				stateItem.SetTitle("Cannot start: " + err.Error())
			}
		case <-open.ClickedCh:
			wailsShow(wctx)
		case <-copyURL.ClickedCh:
			wruntime.ClipboardSetText(wctx, t.rt.engine.URL()+"/v1")
		case <-login.ClickedCh:
			on := !login.Checked()
			if err := setLoginItem(on); err != nil {
				log.Printf("spool: start at login: %v", err)
				continue
			}
			if on {
				login.Check()
			} else {
				login.Uncheck()
			}
		case <-quit.ClickedCh:
			wruntime.Quit(wctx)
			return
		}
	}
}
