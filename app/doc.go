// Command spool is the one Spool binary: the desktop app when double-clicked
// (a Wails window and a menu-bar item over the in-process engine), and a CLI
// from a terminal: app, run, serve, pull, fit, inspect, bench, gen-bench,
// pack and atlas, each in its own cmd_*.go file. Built with -tags headless it
// is a server/CLI binary with no GUI dependency.
//
// It owns three things. The flags, and what they resolve to
// (engineflags.go): engine/host opens the engine from the resulting
// host.Config, and engine/bench runs the benchmark harnesses. The desktop
// shell: the supervisor that runs, stops and restarts the engine and its server
// on a new configuration (supervisor.go, remote.go), the window, the menu bar,
// the login item and the saved settings. And the web UI's own HTTP API,
// beside the inference API engine/server serves on the same listener.
//
// # The UI's HTTP API
//
// engine/server routes /ui/* to the uiAPI handler (ui_*.go) behind the same
// guards as the inference API (engine/httpguard: host check, CORS, API
// key, body limit). Answers are JSON (not cached); errors are
// {"error": {"message": "..."}} with a 4xx or 5xx status.
//
//	GET  /ui/info                 the version, the settings file, the model's shape and the engine's state
//	GET  /ui/plan                 the memory plan of the served model, or (model=glm52) of the
//	                              GLM-5.2 artifact; memory, context and sequences ask what-ifs
//	GET  /ui/atlas                the expert atlas (experts.json) of the model
//	GET  /ui/settings             the saved settings
//	PUT  /ui/settings             changes the fields the body names, the others stay (applied at the next
//	                              start; a new download folder at once); with If-Match: a version, 412
//	                              settings_changed when the file changed since
//	POST /ui/settings/reset       sets the settings file aside (renamed next to it); the defaults apply
//	GET  /ui/download             the download's state: plan, progress, cache folder
//	POST /ui/download/{action}    plan, start, pause, resume or cancel the download
//	POST /ui/download/folder      {"dir"} downloads to another folder from now on
//	POST /ui/download/load        the finished download becomes the model; the engine restarts
//	GET  /ui/engine               the engine choice (this Mac or a server) and the running engine
//	PUT  /ui/engine               {"engine", "remote_url", "remote_key"} saves the choice
//	POST /ui/engine/check         {"remote_url", "remote_key"} asks that server for its models
//
// The desktop window also loads the UI from the embedded assets through
// the shell's own handler (desktop.go), which adds:
//
//	GET  /spool-ui.json           where the API is, and its key
//	GET  /shell/status            the engine's state (engine/status) and its version; ?wait=VERSION
//	                              answers once it has changed since that version
//	POST /shell/start             applies the saved settings and starts the engine
//	POST /shell/stop              stops it
//	POST /shell/open              {"url"} opens an http, https or mailto link in the browser
//	POST /shell/choose-folder     the system folder picker; {"dir"} ("" when cancelled)
//
// Live engine events (download progress, the expert heat map) reach the UI
// on engine/server's /v1/events websocket. Inference, serving and
// downloading live in engine/; the cgo the Mac needs (dock, login item)
// stays in app's _darwin files.
package main
