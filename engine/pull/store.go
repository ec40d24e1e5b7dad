package pull

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/spoolhq/spool/engine/download/hfcache"
)

// StoreEnv names the environment variable that moves Spool's store.
const StoreEnv = "SPOOL_STORE"

// DefaultStore is where Spool keeps the models it downloads: $SPOOL_STORE,
// else ~/Library/Application Support/Spool/Models on macOS, else
// $XDG_DATA_HOME/spool/models (~/.local/share/spool/models).
func DefaultStore() string {
	if s := os.Getenv(StoreEnv); s != "" {
		return s
	}
	home, _ := os.UserHomeDir()
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "Spool", "Models")
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "spool", "models")
	}
	return filepath.Join(home, ".local", "share", "spool", "models")
}

// ModelDir is the directory of repo at commit in the store.
func ModelDir(store, repo, commit string) string {
	return filepath.Join(store, hfcache.Folder(repo), commit)
}

// workDir holds a download's partial files, locks and placeholders.
func workDir(modelDir string) string { return filepath.Join(modelDir, ".spool-download") }

// placeholderPath is where shard name's header-only placeholder sits.
func placeholderPath(modelDir, name string) string {
	return filepath.Join(workDir(modelDir), "headers", filepath.FromSlash(name))
}
