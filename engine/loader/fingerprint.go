package loader

import (
	"context"
	"encoding/hex"
	"path/filepath"

	"github.com/spoolhq/spool/engine/fingerprint"
)

// Fingerprint is the digest of the model's weights: of every shard's name
// and bytes (fingerprint.Model), remembered as o says. It needs only the
// headers (OpenHeaders), and is computed once per Dir (later calls return
// the first result). Not safe for concurrent use.
func (d *Dir) Fingerprint(ctx context.Context, o fingerprint.Options) (fingerprint.Hash, error) {
	if d.weights != nil {
		return *d.weights, nil
	}
	var names []string
	for _, s := range d.Container.Shards() {
		names = append(names, s.Name)
		// A shard of a model directory with a record (a download, or a
		// model whose experts were packed and released) is known by its
		// original bytes' digest.
		if f, ok := d.Record.File(s.Name); ok && f.SHA256 != "" {
			var h fingerprint.Hash
			if _, err := hex.Decode(h[:], []byte(f.SHA256)); err == nil && len(f.SHA256) == 2*len(h) {
				if o.Known == nil {
					o.Known = map[string]fingerprint.Hash{}
				}
				if abs, err := filepath.Abs(filepath.Join(d.Path, s.Name)); err == nil {
					o.Known[abs] = h
				}
			}
		}
	}
	h, err := fingerprint.Model(ctx, d.Path, names, o)
	if err != nil {
		return fingerprint.Hash{}, err
	}
	d.weights = &h
	return h, nil
}
