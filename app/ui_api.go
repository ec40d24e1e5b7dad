package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/spoolhq/spool/engine/atlas"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/speed"
	"github.com/spoolhq/spool/internal/regularfile"
	"github.com/spoolhq/spool/native/sysinfo"
)

// uiAPI answers the UI's own endpoints under /ui/ (the server's guard runs
// first: host check, CORS, API key):
//
//	GET  /ui/info             model shape (expert map rows), version, engine state
//	GET  /ui/plan             the memory plan; ?memory=24GiB&context=8192&sequences=1&kv_cache=bf16 for what-ifs
//	GET  /ui/atlas            the expert atlas (experts.json) and where it came from
//	GET  /ui/settings         the saved settings and their version; PUT changes the fields it names
//	                          (If-Match: a version refuses it when the file changed since); applied
//	                          at the next start; see ui_settings.go
//	POST /ui/settings/reset   sets the settings file aside (an unreadable one, from the Settings page)
//	GET  /ui/engine           the engine choice (this Mac / a server); see ui_engine.go
//	GET  /ui/download         the pinned artifact's download: plan, preflight, progress
//	POST /ui/download/{plan,start,pause,resume,cancel}
//	POST /ui/download/folder  {"dir":…} downloads to another folder (saved in the settings)
//	POST /ui/download/keep    {"keep":…} keeps the original files for other tools, or not (saved in the settings)
//	POST /ui/download/load    serves the finished download (saved in the settings)
type uiAPI struct {
	modelDir  string
	settings  *settingsStore
	downloads *downloadManager
	// host, when set, is the in-process engine (desktop) for /ui/info.
	engine *supervisor
	// load, when set, switches the engine to another model directory.
	load func(dir string) error

	mu      sync.Mutex
	weights map[string]planInput // by model directory
	mux     *http.ServeMux
}

// storedRouted is what the routed experts take on disk read as the speed
// prediction reads them: packed (by the model's packs' mean, or the
// assumed ratio of a download), else raw.
func (in planInput) storedRouted() int64 { return storedRouted(in.w, in.packs) }

type planInput struct {
	cfg *config.Config
	w   plan.Weights
	// packs is what an expert's read moves (the model's packs, or a
	// download's assumed ones).
	packs speedPacks
}

// attach gives the UI's API the supervisor it reports on.
func (u *uiAPI) attach(h *supervisor) { u.engine = h }

func newUIAPI(modelDir string, settings *settingsStore, downloads *downloadManager) *uiAPI {
	u := &uiAPI{modelDir: modelDir, settings: settings, downloads: downloads, weights: map[string]planInput{}}
	if s, _, err := settings.Load(); err == nil && s.KeepOriginal {
		downloads.SetKeepOriginal(true)
	}
	if s, _, err := settings.Load(); err == nil && s.HubCache != "" {
		downloads.SetCacheDir(s.HubCache, cacheFromSettings)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/info", u.handleInfo)
	mux.HandleFunc("GET /ui/plan", u.handlePlan)
	mux.HandleFunc("GET /ui/atlas", u.handleAtlas)
	mux.HandleFunc("GET /ui/settings", u.handleGetSettings)
	mux.HandleFunc("PUT /ui/settings", u.handlePutSettings)
	mux.HandleFunc("POST /ui/settings/reset", u.handleResetSettings)
	mux.HandleFunc("GET /ui/download", u.handleDownload)
	mux.HandleFunc("POST /ui/download/folder", u.handleDownloadFolder)
	mux.HandleFunc("POST /ui/download/keep", u.handleDownloadKeep)
	mux.HandleFunc("POST /ui/download/load", u.handleDownloadLoad)
	mux.HandleFunc("POST /ui/download/{action}", u.handleDownloadAction)
	u.engineRoutes(mux)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		uiError(w, http.StatusNotFound, "no UI route for %s %s", r.Method, r.URL.Path)
	})
	u.mux = mux
	return u
}

func (u *uiAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { u.mux.ServeHTTP(w, r) }

// dir is the model directory: the engine's when there is one (its
// settings may change between starts).
func (u *uiAPI) dir() string {
	if u.engine != nil {
		return u.engine.ModelDir()
	}
	return u.modelDir
}

// uiError writes {"error":{"message":...}} like the API's errors.
func uiError(w http.ResponseWriter, status int, format string, args ...any) {
	uiJSON(w, status, map[string]any{"error": map[string]string{"message": fmt.Sprintf(format, args...)}})
}

func uiJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// modelInfo is the model's shape as the UI draws it.
type modelInfo struct {
	Dir             string `json:"dir"`
	Name            string `json:"name"`
	Layers          int    `json:"layers"`
	SparseLayers    []int  `json:"sparse_layers"`
	MTPLayer        int    `json:"mtp_layer"` // -1 without one
	Experts         int    `json:"experts"`
	ExpertsPerToken int    `json:"experts_per_token"`
	ContextLength   int    `json:"context_length"`
}

func (u *uiAPI) handleInfo(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"version": version, "settings_path": u.settings.Path()}
	if cfg, err := config.Load(u.dir()); err != nil {
		out["model_error"] = err.Error()
	} else {
		mi := modelInfo{
			Dir: u.dir(), Name: filepath.Base(filepath.Clean(u.dir())), Layers: cfg.NumLayers,
			SparseLayers: cfg.SparseLayers(), MTPLayer: -1, Experts: cfg.NumRoutedExperts,
			ExpertsPerToken: cfg.ExpertsPerToken, ContextLength: cfg.MaxPositionEmbeddings,
		}
		if cfg.NumNextNPredictLayers > 0 {
			mi.MTPLayer = cfg.NumLayers
		}
		out["model"] = mi
	}
	if u.engine != nil {
		out["engine"] = u.engine.Status()
	}
	uiJSON(w, http.StatusOK, out)
}

// planInputs reads (once per directory) the config and weights of dir.
func (u *uiAPI) planInputs(dir string) (planInput, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if in, ok := u.weights[dir]; ok {
		return in, nil
	}
	cfg, w, err := host.WeightsOf(dir)
	if err != nil {
		return planInput{}, err
	}
	pk, err := packsOf(dir, cfg)
	if err != nil {
		return planInput{}, err
	}
	in := planInput{cfg: cfg, w: w, packs: pk}
	u.weights[dir] = in
	return in, nil
}

// handlePlan is the memory plan of the served model or (model=glm52) of
// the pinned GLM-5.2 artifact, by default with the engine's context and
// sequence count; memory, context and sequences ask what-ifs.
func (u *uiAPI) handlePlan(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	in, name, err := u.planModel(q.Get("model"))
	if err != nil {
		uiError(w, http.StatusBadRequest, "planning: %v", err)
		return
	}
	serverContext, serverSequences, serverKV := u.planShape()
	var mf memoryFlags
	mf.Budget, mf.ExpertCache, mf.KVCache = q.Get("memory"), q.Get("expert_cache"), serverKV
	if v := q.Get("kv_cache"); v != "" {
		mf.KVCache = v
	}
	opts, err := mf.Options()
	if err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	serverContext = min(serverContext, in.cfg.MaxPositionEmbeddings)
	opts.Context, opts.Sequences = serverContext, serverSequences
	for _, p := range []struct {
		name string
		dst  *int
	}{{"context", &opts.Context}, {"sequences", &opts.Sequences}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				uiError(w, http.StatusBadRequest, "%s must be a positive integer, got %q", p.name, v)
				return
			}
			*p.dst = n
		}
	}
	if opts.Context > in.cfg.MaxPositionEmbeddings {
		uiError(w, http.StatusBadRequest, "context %d is longer than the model's %d tokens", opts.Context, in.cfg.MaxPositionEmbeddings)
		return
	}
	p, err := plan.New(in.cfg, in.w, opts)
	if err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	machine, _ := host.MachineMemory()
	uiJSON(w, http.StatusOK, map[string]any{
		"plan": p, "machine_memory_bytes": machine, "max_context": in.cfg.MaxPositionEmbeddings,
		"model": name, "served_model": filepath.Base(filepath.Clean(u.dir())),
		"routed_bytes": in.w.RoutedBytes, "resident_bytes": in.w.ResidentBytes,
		"routed_stored_bytes": in.storedRouted(), "packs_note": in.packs.note,
		"server_context": serverContext, "server_sequences": serverSequences, "server_kv_cache": serverKV,
		"speed": u.planSpeed(in, p, q.Get("chip")), "chips": speed.Chips(),
	})
}

// atlasCandidates are where the atlas of the model in dir may be: its own
// experts.json, then the shipped one next to the repository or the app.
func atlasCandidates(dir string) []string {
	name := filepath.Base(filepath.Clean(dir)) + ".experts.json"
	out := []string{filepath.Join(dir, "experts.json"), filepath.Join("assets", "atlas", name)}
	if exe, err := os.Executable(); err == nil {
		base := filepath.Dir(exe)
		out = append(out, filepath.Join(base, "..", "assets", "atlas", name), filepath.Join(base, "..", "Resources", "atlas", name))
	}
	return out
}

// maxAtlasBytes bounds experts.json, read on every GET /ui/atlas: GLM-5.2's
// 19,456 experts take a few MB; a FIFO or a huge file in the model
// directory is refused unread.
const maxAtlasBytes = 64 << 20

func (u *uiAPI) handleAtlas(w http.ResponseWriter, r *http.Request) {
	for _, path := range atlasCandidates(u.dir()) {
		data, err := regularfile.Read(path, maxAtlasBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			uiError(w, http.StatusInternalServerError, "reading the atlas: %v", err)
			return
		}
		a, err := atlas.Parse(data)
		if err != nil {
			uiError(w, http.StatusInternalServerError, "%s: %v", path, err)
			return
		}
		uiJSON(w, http.StatusOK, map[string]any{"source": path, "atlas": a})
		return
	}
	uiError(w, http.StatusNotFound, "no experts.json for %s: run `spool atlas --model %s --out %s`",
		u.dir(), u.dir(), filepath.Join(u.dir(), "experts.json"))
}

func (u *uiAPI) handleDownload(w http.ResponseWriter, r *http.Request) {
	uiJSON(w, http.StatusOK, u.downloads.Status())
}

func (u *uiAPI) handleDownloadAction(w http.ResponseWriter, r *http.Request) {
	if err := u.downloads.Do(r.PathValue("action")); err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	uiJSON(w, http.StatusOK, u.downloads.Status())
}

// handleDownloadFolder downloads to another folder from now on (and
// saves the choice) and plans there.
func (u *uiAPI) handleDownloadFolder(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Dir string `json:"dir"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		uiError(w, http.StatusBadRequest, "the folder: %v", err)
		return
	}
	dir, err := checkFolder(strings.TrimSpace(body.Dir))
	if err == nil {
		err = u.downloads.SetCacheDir(dir, cacheFromSettings)
	}
	if err == nil {
		_, _, err = u.settings.Update("", func(s *appSettings) error { s.HubCache = dir; return nil })
	}
	if err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	u.downloads.Do("plan")
	uiJSON(w, http.StatusOK, u.downloads.Status())
}

// handleDownloadKeep keeps the original files for other tools, or not
// (saved in the settings), and plans again.
func (u *uiAPI) handleDownloadKeep(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Keep bool `json:"keep"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		uiError(w, http.StatusBadRequest, "keep: %v", err)
		return
	}
	err := u.downloads.SetKeepOriginal(body.Keep)
	if err == nil {
		_, _, err = u.settings.Update("", func(s *appSettings) error { s.KeepOriginal = body.Keep; return nil })
	}
	if err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	u.downloads.Do("plan")
	uiJSON(w, http.StatusOK, u.downloads.Status())
}

// handleDownloadLoad serves the finished download: it becomes the model
// directory of the settings and the engine restarts on it.
func (u *uiAPI) handleDownloadLoad(w http.ResponseWriter, r *http.Request) {
	st := u.downloads.Status()
	switch {
	case st.ModelDir == "":
		uiError(w, http.StatusBadRequest, "the download is not complete")
		return
	case u.load == nil:
		uiError(w, http.StatusBadRequest, "this server cannot switch models: run `spool serve --model %s`", st.ModelDir)
		return
	}
	if err := u.load(st.ModelDir); err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	uiJSON(w, http.StatusOK, st)
}

// diskFree is sysinfo.DiskFree with the error as text, for the UI.
func diskFree(path string) map[string]any {
	ds, err := sysinfo.DiskFree(path)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	return map[string]any{"path": ds.Path, "total": ds.Total, "available": ds.Available, "important": ds.Important}
}
