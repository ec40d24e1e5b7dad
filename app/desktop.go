//go:build !headless

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/menu"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"
)

// desktopAvailable reports whether a window can open: always on macOS,
// with a display elsewhere.
func desktopAvailable() bool {
	if runtime.GOOS == "darwin" {
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// runDesktop runs the menu-bar item and the window (Wails v2) on the main
// goroutine until the user quits. The tray starts first, on this
// goroutine, as fyne.io/systray's external-loop mode requires on macOS;
// the window never depends on it (there may be no tray host on Linux).
func runDesktop(ctx context.Context, rt *appRuntime) error {
	t := startTray(rt)
	wailsCtx := make(chan context.Context, 1)
	t.wails = wailsCtx
	// The window's context, for the shell's endpoints (the tray may not
	// run: there may be no tray host on Linux).
	var mu sync.Mutex
	var window context.Context
	windowCtx := func() context.Context {
		mu.Lock()
		defer mu.Unlock()
		return window
	}
	app := &options.App{
		Title:     "Spool",
		Width:     1240,
		Height:    820,
		MinWidth:  720,
		MinHeight: 480,
		AssetServer: &assetserver.Options{
			Assets:  rt.engine.Assets(),
			Handler: shellHandler(ctx, rt, windowCtx),
		},
		BackgroundColour: &options.RGBA{R: 245, G: 246, B: 248, A: 255},
		// On macOS closing the window hides it: the engine keeps serving
		// and the menu bar reopens it. Elsewhere the tray may be missing,
		// so closing quits.
		HideWindowOnClose: runtime.GOOS == "darwin",
		Menu:              appMenu(),
		SingleInstanceLock: &options.SingleInstanceLock{
			UniqueId:               "com.spoolhq.spool",
			OnSecondInstanceLaunch: func(options.SecondInstanceData) { t.showWindow() },
		},
		OnStartup: func(wctx context.Context) {
			mu.Lock()
			window = wctx
			mu.Unlock()
			wailsCtx <- wctx
			rt.engine.Start(ctx)
		},
		OnDomReady: func(context.Context) { setAccessoryPolicy() },
		OnShutdown: func(context.Context) {
			rt.engine.Stop()
			t.stop()
		},
		Mac: &mac.Options{
			About: &mac.AboutInfo{Title: "Spool", Message: "GLM-5.2 on a Mac with 32 GB of memory.\nVersion " + version, Icon: appIcon},
		},
		Linux: &linux.Options{Icon: appIcon, ProgramName: "spool"},
	}
	return wails.Run(app)
}

// appMenu keeps the Edit menu so that copy, paste and select-all work in
// the webview on macOS.
func appMenu() *menu.Menu {
	if runtime.GOOS != "darwin" {
		return nil
	}
	m := menu.NewMenu()
	m.Append(menu.AppMenu())
	m.Append(menu.EditMenu())
	m.Append(menu.WindowMenu())
	return m
}

// shellWait bounds how long GET /shell/status?wait holds an answer back.
const shellWait = 25 * time.Second

// shellHandler answers what the embedded assets do not: spool-ui.json
// (where the API is, and its key), the shell's engine controls, opening a
// link in the system browser and choosing a folder. wails is the window's
// context once it runs.
func shellHandler(ctx context.Context, rt *appRuntime, wails func() context.Context) http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /spool-ui.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"api": rt.engine.URL(), "key": rt.engine.APIKey(), "shell": true})
	})
	// The supervisor's state, with the status board's version; with
	// ?wait=VERSION the answer waits (up to shellWait) until the state
	// has changed since that version: the page follows the state without
	// polling it.
	mux.HandleFunc("GET /shell/status", func(w http.ResponseWriter, r *http.Request) {
		board := rt.engine.Board()
		version := board.Version()
		if wait, err := strconv.ParseUint(r.URL.Query().Get("wait"), 10, 64); err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), shellWait)
			version = board.Wait(ctx, wait)
			cancel()
		}
		writeJSON(w, struct {
			engineStatus
			Version uint64 `json:"version"`
		}{rt.engine.Status(), version})
	})
	mux.HandleFunc("POST /shell/start", func(w http.ResponseWriter, r *http.Request) {
		if err := rt.restart(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, rt.engine.Status())
	})
	mux.HandleFunc("POST /shell/stop", func(w http.ResponseWriter, r *http.Request) {
		rt.engine.Stop()
		writeJSON(w, rt.engine.Status())
	})
	mux.HandleFunc("POST /shell/open", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			URL string `json:"url"`
		}
		json.NewDecoder(io.LimitReader(r.Body, 16<<10)).Decode(&body)
		u, err := url.Parse(body.URL)
		wctx := wails()
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "mailto"):
			http.Error(w, "only http, https and mailto links open in the browser", http.StatusBadRequest)
			return
		case wctx == nil:
			http.Error(w, "the window is not ready", http.StatusServiceUnavailable)
			return
		}
		wruntime.BrowserOpenURL(wctx, u.String())
		writeJSON(w, map[string]bool{"opened": true})
	})
	mux.HandleFunc("POST /shell/choose-folder", func(w http.ResponseWriter, r *http.Request) {
		wctx := wails()
		if wctx == nil {
			http.Error(w, "the window is not ready", http.StatusServiceUnavailable)
			return
		}
		dir, err := wruntime.OpenDirectoryDialog(wctx, wruntime.OpenDialogOptions{Title: "Choose where to download GLM-5.2", CanCreateDirectories: true})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, map[string]string{"dir": dir}) // "" when cancelled
	})
	return mux
}

// wailsShow shows and focuses the window.
func wailsShow(ctx context.Context) {
	wruntime.WindowShow(ctx)
	wruntime.WindowUnminimise(ctx)
	activateApp()
}
