package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/native/diskio"
)

// The prompt cache of the commands that load a model (run, serve, app):
// the --prompt-cache and --prompt-cache-max flags, its lines in the memory
// plan, and the cache itself once the model is loaded.

// promptCacheOff is the --prompt-cache value that turns the cache off.
const promptCacheOff = "off"

// promptCacheFlags are --prompt-cache and --prompt-cache-max.
type promptCacheFlags struct {
	dir string
	max string
}

func (f *promptCacheFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dir, "prompt-cache", "", `prompt cache directory: the state of prompt prefixes, kept across requests and restarts so that a repeated prefix is not read again (default: Spool/prompt-cache in the user's cache directory; "off" turns the prompt cache off)`)
	fs.StringVar(&f.max, "prompt-cache-max", "", "disk space the prompt cache may use, e.g. 20GiB (default: a tenth of its volume, between 1 GiB and 64 GiB)")
}

// promptCacheSetup is a resolved prompt cache: off, or a disk tier in Dir
// capped at DiskBytes (no disk tier when Dir is empty); the memory plan
// sizes the memory tier.
type promptCacheSetup struct {
	Off       bool
	Dir       string
	DiskBytes int64
	// Logger hears about damaged files and disk trouble (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// resolve checks the flags and fills in the defaults.
func (f promptCacheFlags) resolve() (promptCacheSetup, error) {
	if f.dir == promptCacheOff {
		if f.max != "" {
			return promptCacheSetup{}, fmt.Errorf("--prompt-cache-max needs a prompt cache, but --prompt-cache is %s", promptCacheOff)
		}
		return promptCacheSetup{Off: true}, nil
	}
	s := promptCacheSetup{Dir: f.dir}
	if s.Dir == "" {
		var err error
		if s.Dir, err = promptcache.DefaultDir(); err != nil {
			return s, fmt.Errorf("--prompt-cache: %w", err)
		}
	}
	if f.max == "" {
		s.DiskBytes = promptcache.DefaultDiskBytes(s.Dir)
		return s, nil
	}
	var err error
	if s.DiskBytes, err = plan.ParseSize(f.max); err != nil {
		return s, fmt.Errorf("--prompt-cache-max: %w", err)
	}
	return s, nil
}

// planMemory is the cache's footprint for the memory plan of the model of
// cfg with weights w (nil when the cache is off); the plan sizes the
// memory tier.
func (s promptCacheSetup) planMemory(cfg *config.Config, w plan.Weights) (*plan.PromptCacheMemory, error) {
	if s.Off {
		return nil, nil
	}
	fp, err := promptcache.Footprint(s.options(promptcache.Identity{Geometry: plan.CacheGeometry(cfg, w), Hidden: cfg.HiddenSize}, 0, nil))
	if err != nil {
		return nil, err
	}
	return &fp, nil
}

// open opens the cache for the loaded model in d with the memory tier p
// planned, reading through pool (nil: its own); nil when the cache is off.
// The model's identity covers its weights' bytes (remembered in the
// fingerprint store after the first time).
// The caller closes it once nothing generates any more.
func (s promptCacheSetup) open(ctx context.Context, d *loader.Dir, p *plan.Plan, pool *diskio.ReadPool) (*promptcache.Cache, error) {
	if s.Off {
		return nil, nil
	}
	id, err := promptcache.IdentityOf(ctx, d, engineBuild(), fingerprint.Options{Store: fingerprintStore(), Logger: s.Logger})
	if err != nil {
		return nil, err
	}
	return promptcache.New(s.options(id, p.PromptCacheBytes, pool))
}

func (s promptCacheSetup) options(id promptcache.Identity, memory int64, pool *diskio.ReadPool) promptcache.Options {
	return promptcache.Options{Identity: id, MemoryBytes: memory, Dir: s.Dir, DiskBytes: s.DiskBytes, Pool: pool, Logger: s.Logger}
}

// engineBuild names this build's numerics for the prompt cache's identity:
// the version, or for a development build its commit (a build with local
// changes is marked, and its blocks are shared only with builds of the
// same commit and marking).
func engineBuild() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	b := version
	for _, kv := range info.Settings {
		switch {
		case kv.Key == "vcs.revision":
			b += "+" + kv.Value
		case kv.Key == "vcs.modified" && kv.Value == "true":
			b += "-modified"
		}
	}
	return b
}
