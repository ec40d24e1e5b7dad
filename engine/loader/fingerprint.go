package loader

import (
	"context"

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
	}
	h, err := fingerprint.Model(ctx, d.Path, names, o)
	if err != nil {
		return fingerprint.Hash{}, err
	}
	d.weights = &h
	return h, nil
}
