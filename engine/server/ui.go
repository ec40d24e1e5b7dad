package server

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/apiwire"
)

// UI is the web UI served beside the API (spool serve in a browser, the
// desktop shell's webview).
type UI struct {
	// Assets is the built UI, index.html at its root. It is served to
	// GET and HEAD requests without the API key (it holds no data; the
	// page asks for the key when the server wants one), behind the
	// DNS-rebinding guard.
	Assets fs.FS
	// API answers the UI's own endpoints under /ui/ (fit plan, atlas,
	// settings, download), behind every guard of the API.
	API http.Handler
}

// uiPrefix is the path prefix of UI.API.
const uiPrefix = "/ui/"

// WithUI serves ui: "/" and every file of ui.Assets, and /ui/... through
// ui.API. Paths the assets lack fall through to the API routes. Call it
// before Serve.
func (s *Server) WithUI(ui UI) {
	api := s.handler
	var files http.Handler
	if ui.Assets != nil {
		files = http.FileServerFS(ui.Assets)
	}
	var uiAPI http.Handler
	if ui.API != nil {
		uiAPI = s.guard.Handler(ui.API)
	}
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if uiAPI != nil && strings.HasPrefix(p, uiPrefix) {
			uiAPI.ServeHTTP(w, r)
			return
		}
		if files != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && isAsset(ui.Assets, p) {
			if !s.guard.HostAllowed(r) {
				writeError(w, r, apiwire.Forbidden("host %q is not allowed (DNS-rebinding guard); add it with --allowed-host", r.Host))
				return
			}
			access.From(r.Context()).SetQuiet()
			h := w.Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			if strings.HasPrefix(p, "/assets/") {
				// Vite names these by content hash.
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				h.Set("Cache-Control", "no-cache")
				h.Set("X-Frame-Options", "DENY")
			}
			files.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// isAsset reports whether p names index.html ("/") or a regular file of
// assets.
func isAsset(assets fs.FS, p string) bool {
	if p == "/" {
		p = "/index.html"
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name == "" || !fs.ValidPath(name) {
		return false
	}
	st, err := fs.Stat(assets, name)
	return err == nil && st.Mode().IsRegular()
}
