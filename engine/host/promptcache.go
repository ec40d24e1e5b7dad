package host

import (
	"context"
	"log/slog"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/native/diskio"
)

// The prompt cache of an engine: its lines in the memory plan, and the
// cache itself once the model is loaded.

// PromptCache is a resolved prompt cache: off, or a disk tier in Dir
// capped at DiskBytes (no disk tier when Dir is empty); the memory plan
// sizes the memory tier.
type PromptCache struct {
	Off       bool
	Dir       string
	DiskBytes int64
	// Logger hears about damaged files and disk trouble (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Build names the build's numerics in the cache's identity (blocks
	// are shared only among builds of the same name).
	Build string
}

// PlanMemory is the cache's footprint for the memory plan of the model of
// cfg with weights w (nil when the cache is off); the plan sizes the
// memory tier.
func (s PromptCache) PlanMemory(cfg *config.Config, w plan.Weights) (*plan.PromptCacheMemory, error) {
	if s.Off {
		return nil, nil
	}
	fp, err := promptcache.Footprint(s.options(promptcache.Identity{Geometry: plan.CacheGeometry(cfg, w), Hidden: cfg.HiddenSize}, 0, nil))
	if err != nil {
		return nil, err
	}
	return &fp, nil
}

// Open opens the cache for the loaded model in d with the memory tier p
// planned, reading through pool (nil: its own); nil when the cache is off.
// The model's identity covers its weights' bytes (remembered in the
// fingerprint store after the first time).
// The caller closes it once nothing generates any more.
func (s PromptCache) Open(ctx context.Context, d *loader.Dir, p *plan.Plan, pool *diskio.ReadPool) (*promptcache.Cache, error) {
	if s.Off {
		return nil, nil
	}
	id, err := promptcache.IdentityOf(ctx, d, s.Build, fingerprint.Options{Store: FingerprintStore(), Logger: s.Logger})
	if err != nil {
		return nil, err
	}
	return promptcache.New(s.options(id, p.PromptCacheBytes, pool))
}

func (s PromptCache) options(id promptcache.Identity, memory int64, pool *diskio.ReadPool) promptcache.Options {
	return promptcache.Options{Identity: id, MemoryBytes: memory, Dir: s.Dir, DiskBytes: s.DiskBytes, Pool: pool, Logger: s.Logger}
}
