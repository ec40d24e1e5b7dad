//go:build !headless

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"runtime"

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
	app := &options.App{
		Title:     "Spool",
		Width:     1240,
		Height:    820,
		MinWidth:  720,
		MinHeight: 480,
		AssetServer: &assetserver.Options{
			Assets:  rt.host.assets,
			Handler: shellHandler(ctx, rt),
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
			wailsCtx <- wctx
			rt.host.Start(ctx)
		},
		OnDomReady: func(context.Context) { setAccessoryPolicy() },
		OnShutdown: func(context.Context) {
			rt.host.Stop()
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

// shellHandler answers what the embedded assets do not: spool-ui.json
// (where the API is, and its key) and the shell's engine controls.
func shellHandler(ctx context.Context, rt *appRuntime) http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /spool-ui.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"api": rt.host.URL(), "key": rt.host.APIKey(), "shell": true})
	})
	mux.HandleFunc("GET /shell/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, rt.host.Status())
	})
	mux.HandleFunc("POST /shell/start", func(w http.ResponseWriter, r *http.Request) {
		if err := rt.restart(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, rt.host.Status())
	})
	mux.HandleFunc("POST /shell/stop", func(w http.ResponseWriter, r *http.Request) {
		rt.host.Stop()
		writeJSON(w, rt.host.Status())
	})
	return mux
}

// wailsShow shows and focuses the window.
func wailsShow(ctx context.Context) {
	wruntime.WindowShow(ctx)
	wruntime.WindowUnminimise(ctx)
	activateApp()
}
