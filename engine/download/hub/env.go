package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Env is the huggingface_hub environment as its documentation defines it.
type Env struct {
	Endpoint string // HF_ENDPOINT, default https://huggingface.co
	Home     string // HF_HOME, default $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface
	CacheDir string // HF_HUB_CACHE (or legacy HUGGINGFACE_HUB_CACHE), default $HF_HOME/hub
	Token    string // HF_TOKEN, else the contents of HF_TOKEN_PATH or $HF_HOME/token
	// TokenSource says where Token came from: "HF_TOKEN", a file path, or ""
	// when there is no token.
	TokenSource string
	Offline     bool // HF_HUB_OFFLINE set to a true value
}

// EnvFromOS reads Env from the process environment and the token file.
func EnvFromOS() (Env, error) {
	return LoadEnv(os.LookupEnv, os.ReadFile)
}

// LoadEnv reads Env through lookup (like os.LookupEnv) and readFile (like
// os.ReadFile, for the token file), so tests can supply both.
func LoadEnv(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (Env, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	var env Env
	env.Endpoint = strings.TrimRight(get("HF_ENDPOINT"), "/")
	if env.Endpoint == "" {
		env.Endpoint = DefaultEndpoint
	}
	if !strings.HasPrefix(env.Endpoint, "http://") && !strings.HasPrefix(env.Endpoint, "https://") {
		return Env{}, fmt.Errorf("hub: HF_ENDPOINT %q: want an http:// or https:// URL", env.Endpoint)
	}
	home, err := expandHome(get("HF_HOME"), get)
	if err != nil {
		return Env{}, err
	}
	if home == "" {
		cache, err := expandHome(get("XDG_CACHE_HOME"), get)
		if err != nil {
			return Env{}, err
		}
		if cache == "" {
			if cache, err = expandHome("~/.cache", get); err != nil {
				return Env{}, err
			}
		}
		home = filepath.Join(cache, "huggingface")
	}
	env.Home = home
	cacheDir := get("HF_HUB_CACHE")
	if cacheDir == "" {
		cacheDir = get("HUGGINGFACE_HUB_CACHE")
	}
	if env.CacheDir, err = expandHome(cacheDir, get); err != nil {
		return Env{}, err
	}
	if env.CacheDir == "" {
		env.CacheDir = filepath.Join(home, "hub")
	}
	switch strings.ToLower(get("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		env.Offline = true
	}
	if tok := get("HF_TOKEN"); tok != "" {
		env.Token, env.TokenSource = tok, "HF_TOKEN"
		return env, nil
	}
	tokenPath, err := expandHome(get("HF_TOKEN_PATH"), get)
	if err != nil {
		return Env{}, err
	}
	if tokenPath == "" {
		tokenPath = filepath.Join(home, "token")
	}
	b, err := readFile(tokenPath)
	switch {
	case err == nil:
		if tok := strings.TrimSpace(string(b)); tok != "" {
			env.Token, env.TokenSource = tok, tokenPath
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return Env{}, fmt.Errorf("hub: read token file %s: %w", tokenPath, err)
	}
	return env, nil
}

// expandHome replaces a leading "~" with the home directory ($HOME, else the
// operating system's answer).
func expandHome(p string, get func(string) string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home := get("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("hub: expand %q: %w", p, err)
		}
		home = h
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
