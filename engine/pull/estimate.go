package pull

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
)

// AssumedRatio is the packed size of routed experts, as a fraction of
// their raw bytes, assumed before any shard of a model is packed: int4
// experts of trained models pack to 0.74-0.78 (GLM-5.2's census: 0.76);
// a little above, to be on the safe side. Once shards are packed, their
// measured ratio replaces it.
const AssumedRatio = 0.80

// Estimate is what a model will take in the store.
type Estimate struct {
	// Download is the bytes of every file, Stored what they will take on
	// disk once packed, StoredKeepingOriginal what the original files and
	// the packs beside them take (KeepOriginal).
	Download, Stored, StoredKeepingOriginal int64
	// ExpertBytes and DenseBytes split the shards' payload (headers
	// read, or known for the default artifact).
	ExpertBytes, DenseBytes int64
	// Ratio is the packed size of the experts over their raw size:
	// measured on the shards packed so far, else AssumedRatio.
	Ratio    float64
	Measured bool
	// From says where the split came from: "headers", "published
	// figures" or "" (unknown: nothing is assumed saved).
	From string
}

// splitOf is a shard's expert and other bytes.
type splitOf struct{ experts, other int64 }

// splitHeader sorts a shard's bytes into the routed experts' that pack
// (weights and scales of the decoder layers, below mtpLayer) and the rest
// (the MTP layer's int8 experts, which packs do not shrink, included;
// mtpLayer < 0: every expert packs), from its header.
func splitHeader(prefix []byte, size int64, mtpLayer int) (splitOf, error) {
	ts, err := container.HeaderTensors(prefix, size)
	if err != nil {
		return splitOf{}, err
	}
	var s splitOf
	for _, t := range ts {
		if !strings.Contains(t.Name, ".mlp.experts.") {
			continue
		}
		var l int
		if _, err := fmt.Sscanf(t.Name, "model.layers.%d.", &l); err == nil && mtpLayer >= 0 && l >= mtpLayer {
			continue
		}
		s.experts += t.Size
	}
	s.other = size - s.experts
	return s, nil
}

// The default artifact's split (../shared/fixtures/glm52-real/README.md):
// what a preflight assumes when the shards' headers cannot be read.
const (
	defaultArtifactExperts = 372_848_459_776
	defaultArtifactBytes   = 383_760_077_466
)

// estimate says what each file still to fetch will take: a shard's other
// bytes plus ratio times its experts', and the rest as they are.
func (p *Puller) estimate(plan *download.Plan) Estimate {
	e := Estimate{Ratio: AssumedRatio}
	if r, ok := p.measuredRatio(); ok {
		e.Ratio, e.Measured = r, true
	}
	p.mu.Lock()
	splits := p.splits
	p.mu.Unlock()
	known := 0
	var shardBytes int64
	for _, f := range plan.Files {
		e.Download += f.Size
		if !isShard(f.Path) {
			e.Stored += f.Size
			continue
		}
		shardBytes += f.Size
		if s, ok := splits[f.Path]; ok {
			known++
			e.ExpertBytes += s.experts
			e.DenseBytes += s.other
		}
	}
	switch {
	case known > 0 && known == countShards(plan):
		e.From = "headers"
	case p.opts.Repo == download.DefaultRepo && e.Download == defaultArtifactBytes:
		e.From = "published figures"
		e.ExpertBytes, e.DenseBytes = defaultArtifactExperts, shardBytes-defaultArtifactExperts
	default:
		e.ExpertBytes, e.DenseBytes, e.From = 0, shardBytes, ""
	}
	e.Stored += e.DenseBytes + int64(e.Ratio*float64(e.ExpertBytes))
	e.StoredKeepingOriginal = e.Download + int64(e.Ratio*float64(e.ExpertBytes))
	return e
}

// need is download.Options.Need: what the files still to fetch will take,
// packed, plus the raw bytes of the shards in flight.
func (p *Puller) need(plan *download.Plan) (int64, string) {
	est := p.estimate(plan)
	p.mu.Lock()
	splits := p.splits
	p.mu.Unlock()
	var stored int64
	var extra []int64 // per shard still to fetch: raw over packed
	for _, f := range plan.Files {
		if f.Status == download.FileComplete {
			continue
		}
		s, ok := splits[f.Path]
		if !isShard(f.Path) || !ok || est.From == "" {
			stored += f.Size - f.Present
			continue
		}
		if est.From == "published figures" {
			s = splitOf{experts: f.Size * defaultArtifactExperts / defaultArtifactBytes}
			s.other = f.Size - s.experts
		}
		packedSize := s.other + int64(est.Ratio*float64(s.experts))
		stored += max(packedSize-f.Present, 0)
		extra = append(extra, f.Size-packedSize)
	}
	if p.opts.KeepOriginal {
		var packs int64
		for _, f := range plan.Files {
			if s, ok := splits[f.Path]; ok && !p.packedAlready(f.Path) {
				packs += int64(est.Ratio * float64(s.experts))
			}
		}
		return plan.ToFetch + packs, fmt.Sprintf("the original files, kept for other tools, plus their experts' packs (%.2f of the experts' bytes%s)",
			est.Ratio, ratioWhy(est))
	}
	if est.From == "" {
		return stored, "the shards' headers could not be read, so no saving is assumed"
	}
	slices.Sort(extra)
	slices.Reverse(extra)
	var inFlight int64
	for _, x := range extra[:min(p.window(), len(extra))] {
		inFlight += x
	}
	return stored + inFlight, fmt.Sprintf("packed as it downloads, the routed experts at %.2f of their bytes%s, plus %s for the %d shards on disk raw at once",
		est.Ratio, ratioWhy(est), download.FormatBytes(inFlight), min(p.window(), len(extra)))
}

func ratioWhy(e Estimate) string {
	if e.Measured {
		return " (measured on the shards packed so far)"
	}
	return " (assumed before any is packed)"
}

func isShard(path string) bool { return strings.HasSuffix(path, ".safetensors") }

func countShards(plan *download.Plan) int {
	n := 0
	for _, f := range plan.Files {
		if isShard(f.Path) {
			n++
		}
	}
	return n
}

func shardsOf(files []hub.File) []hub.File {
	var out []hub.File
	for _, f := range files {
		if isShard(f.Path) {
			out = append(out, f)
		}
	}
	return out
}
