package promptcache_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/internal/fixtures"
)

// The call sequence of one request: look the prompt up, restore the longest
// cached prefix into the request's sequence, forward the rest, store the
// new full blocks. A second turn resends the first; after a restart the
// blocks come from disk.
func Example() {
	ctx := context.Background()
	d, err := loader.Open(ctx, fixtures.DemoModel(), loader.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	dir, err := os.MkdirTemp("", "prompt-cache")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	id, err := promptcache.IdentityOf(context.Background(), d, "example build", fingerprint.Options{})
	if err != nil {
		log.Fatal(err)
	}
	opts := promptcache.Options{
		Identity:    id,
		MemoryBytes: 16 << 20,
		Dir:         dir,
		DiskBytes:   1 << 30,
		Logger:      slog.New(slog.DiscardHandler),
	}
	cache, err := promptcache.New(opts)
	if err != nil {
		log.Fatal(err)
	}

	m := d.Model
	serve := func(prompt []int) {
		seq := m.NewSequence(0)
		match := cache.Lookup(prompt)
		restored, err := cache.Restore(ctx, seq, match)
		if err != nil {
			log.Fatal(err)
		}
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: prompt[seq.Len():]}}, nil)
		if err != nil {
			log.Fatal(err)
		}
		// No MTP state is stored here: this sequence's MTP layer has not
		// absorbed the prompt (see the package doc for the decode core's
		// sequence).
		stored := cache.Store(ctx, seq, promptcache.Hidden{From: restored.Tokens, Rows: out[0].Hidden})
		fmt.Printf("%d prompt tokens: %d restored (%d from memory, %d from disk), %d forwarded, %d newly cached\n",
			len(prompt), restored.Tokens, restored.FromMemory, restored.FromDisk, len(prompt)-restored.Tokens, stored.Tokens)
	}

	system := make([]int, 40)
	for i := range system {
		system[i] = 100 + i
	}
	turn1 := append(system, 7, 8, 9)
	turn2 := append(turn1, 300, 301, 302, 303, 304, 305, 306, 307, 308)
	serve(turn1)
	serve(turn2)

	// A restart: the blocks are on disk.
	cache.Close()
	if cache, err = promptcache.New(opts); err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	serve(append(turn2, 400))
	// Output:
	// 43 prompt tokens: 0 restored (0 from memory, 0 from disk), 43 forwarded, 32 newly cached
	// 52 prompt tokens: 32 restored (32 from memory, 0 from disk), 20 forwarded, 16 newly cached
	// 53 prompt tokens: 48 restored (0 from memory, 48 from disk), 5 forwarded, 0 newly cached
}
