package plan

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
)

// suggest proposes the smallest memory, and where it helps, the longest
// context or fewest sequences, with which the run fits. Each figure is
// found by planning again, so it is exact.
func (p *Plan) suggest(cfg *config.Config, w Weights, opts Options) string {
	fits := func(o Options) bool {
		q, err := build(cfg, w, o)
		return err == nil && q.Fits
	}
	const gib = 1 << 30
	mem := opts
	mem.MachineMemory = nil
	lo, hi := int64(1), int64(1)
	for mem.Memory = hi * gib; !fits(mem); mem.Memory = hi * gib {
		if hi >= 1<<20 {
			return "does not fit in any memory: " + p.Problem
		}
		lo, hi = hi+1, 2*hi
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if mem.Memory = mid * gib; fits(mem) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s := fmt.Sprintf("needs at least %d GiB of memory (--memory %dGiB)", hi, hi)

	ctx := opts
	ctx.Memory = p.MemoryBytes
	ctx.Context = 256
	if p.Context > 256 && fits(ctx) {
		lo, hi := 1, p.Context/256-1 // in units of 256 tokens, below the planned context
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if ctx.Context = mid * 256; fits(ctx) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo*256 < p.Context {
			s += fmt.Sprintf(", or reduce --context to %d", lo*256)
		}
	}
	if p.Sequences > 1 {
		one := opts
		one.Sequences = 1
		one.Memory = p.MemoryBytes
		if fits(one) {
			s += ", or decode one sequence at a time"
		}
	}
	if opts.ExpertCache > 0 && p.SlotSetBytes > 0 && opts.ExpertCache/p.SlotSetBytes >= 1 {
		s += ", or leave --expert-cache unset to size the cache from what remains"
	}
	return s
}
