package loader

import (
	"context"
	"fmt"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/model"
)

// Fingerprint is the digest of the model's weights: of every shard's name
// and bytes (fingerprint.Model), remembered as o says. The same read takes
// the CRC-32C of every routed expert's extents, which it sets on the
// container (container.Checksums) for the streamed tier to check each
// read against. It needs only the headers (OpenHeaders), and is computed
// once per Dir (later calls return the first result); call it before Load
// for the tier to check its reads. Not safe for concurrent use.
func (d *Dir) Fingerprint(ctx context.Context, o fingerprint.Options) (fingerprint.Hash, error) {
	if d.weights != nil {
		return *d.weights, nil
	}
	c := d.Container
	var names []string
	byName := map[string]int{}
	for i, s := range c.Shards() {
		names = append(names, s.Name)
		byName[s.Name] = i
	}
	extents, err := d.expertExtents(byName)
	if err != nil {
		return fingerprint.Hash{}, err
	}
	o.Regions = make([][]fingerprint.Region, len(names))
	for i, es := range extents {
		for _, e := range es {
			o.Regions[i] = append(o.Regions[i], fingerprint.Region{Off: e.Offset, Len: e.Length})
		}
	}
	h, files, err := fingerprint.ModelFiles(ctx, d.Path, names, o)
	if err != nil {
		return fingerprint.Hash{}, err
	}
	sums := container.NewChecksums()
	for i, f := range files {
		if len(extents[i]) > 0 {
			sums.Add(names[i], f.Stamp, extents[i], f.CRC32C)
		}
	}
	c.SetChecksums(sums)
	d.weights = &h
	return h, nil
}

// expertExtents lists, by shard (its index in byName), the extents of
// every routed expert of the model's expert layers (the MTP layer's
// included when the container holds it).
func (d *Dir) expertExtents(byName map[string]int) ([][]container.Extent, error) {
	c, cfg := d.Container, d.Config
	caps, err := model.DetectCapabilities(cfg, &Weights{C: c})
	if err != nil {
		return nil, err
	}
	out := make([][]container.Extent, len(byName))
	for _, l := range model.ExpertLayers(cfg, caps.MTP) {
		for e := range cfg.NumRoutedExperts {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return nil, fmt.Errorf("loader: %w", err)
			}
			for _, es := range [][]container.Extent{loc.Weights, loc.Scales} {
				for _, x := range es {
					i, ok := byName[x.File]
					if !ok {
						return nil, fmt.Errorf("loader: layer %d expert %d: shard %q is not open", l, e, x.File)
					}
					out[i] = append(out[i], x)
				}
			}
		}
	}
	return out, nil
}
