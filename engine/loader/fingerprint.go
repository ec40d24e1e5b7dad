package loader

import (
	"context"

	"github.com/spoolhq/spool/engine/fingerprint"
)

// Fingerprint is the digest of the model's weights: of every shard's name
// and bytes (fingerprint.Model), remembered as o says. It needs only the
// headers (OpenHeaders).
func (d *Dir) Fingerprint(ctx context.Context, o fingerprint.Options) (fingerprint.Hash, error) {
	var names []string
	for _, s := range d.Container.Shards() {
		names = append(names, s.Name)
	}
	return fingerprint.Model(ctx, d.Path, names, o)
}
