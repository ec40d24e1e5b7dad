package download

import (
	"context"
	"fmt"
	"testing"

	"github.com/spoolhq/spool/engine/download/fakehub"
)

// BenchmarkDownload measures end-to-end throughput against the local fake
// hub (loopback HTTP, ranged requests, writing, syncing, checkpointing and
// verifying): MB/s is bytes of blobs per second.
func BenchmarkDownload(b *testing.B) {
	repo := fakehub.SampleRepo(testRepoID, 99, 48<<20, 48<<20, 32<<20)
	for _, bc := range []struct {
		conns int
		chunk int64
	}{
		{1, 64 << 20}, {4, 16 << 20}, {8, 16 << 20},
	} {
		b.Run(fmt.Sprintf("conns=%d/chunk=%dMiB", bc.conns, bc.chunk>>20), func(b *testing.B) {
			_, url := startHubB(b, repo)
			b.SetBytes(repo.Size())
			for b.Loop() {
				o := testOptions(url, b.TempDir(), nil)
				o.Connections, o.ChunkSize, o.CheckpointBytes = bc.conns, bc.chunk, 0
				o.ProgressInterval = 0
				j, err := New(o)
				if err != nil {
					b.Fatal(err)
				}
				if err := j.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
