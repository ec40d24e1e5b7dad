package pull

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/internal/atomicfile"
)

// headerProbe is the first request's length: most shards' headers fit.
const headerProbe = 256 << 10

// fetchRange reads bytes [start, end) of f at commit from the hub; a
// server that ignores ranges is read from its start.
func fetchRange(ctx context.Context, c *hub.Client, repo, commit string, f hub.File, start, end int64) ([]byte, error) {
	body, err := c.Fetch(ctx, repo, commit, f, start, end)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if skip := start - body.Start; skip > 0 {
		if _, err := io.CopyN(io.Discard, body, skip); err != nil {
			return nil, err
		}
	}
	b := make([]byte, end-start)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// fetchHeader reads shard f's safetensors header, length prefix included.
func fetchHeader(ctx context.Context, c *hub.Client, repo, commit string, f hub.File) ([]byte, error) {
	if f.Size < 8 {
		return nil, fmt.Errorf("%s has %d bytes, too short for a safetensors header", f.Path, f.Size)
	}
	b, err := fetchRange(ctx, c, repo, commit, f, 0, min(headerProbe, f.Size))
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(b)
	if n > container.MaxHeaderBytes || int64(n) > f.Size-8 {
		return nil, fmt.Errorf("%s: header length %d does not fit the file's %d bytes", f.Path, n, f.Size)
	}
	want := 8 + int64(n)
	if int64(len(b)) < want {
		rest, err := fetchRange(ctx, c, repo, commit, f, int64(len(b)), want)
		if err != nil {
			return nil, err
		}
		b = append(b, rest...)
	}
	return b[:want], nil
}

// placeholders makes, for every shard not in place, a file of the shard's
// size that holds its header and nothing else (a hole), so that the
// model's experts can be located before their bytes arrive. A placeholder
// already there with the right size is kept. It fetches the headers on a
// few connections.
func placeholders(ctx context.Context, c *hub.Client, repo, commit, modelDir string, shards []hub.File, known map[string][]byte) error {
	var todo []hub.File
	for _, f := range shards {
		if fi, err := os.Stat(placeholderPath(modelDir, f.Path)); err == nil && fi.Size() == f.Size {
			continue
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(workDir(modelDir), "headers"), 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan hub.File)
	errs := make(chan error, len(todo))
	var wg sync.WaitGroup
	for range min(8, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := placeholder(ctx, c, repo, commit, modelDir, f, known[f.Path]); err != nil {
					errs <- fmt.Errorf("reading the header of %s: %w", f.Path, err)
					cancel()
				}
			}
		}()
	}
	for _, f := range todo {
		select {
		case work <- f:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

func placeholder(ctx context.Context, c *hub.Client, repo, commit, modelDir string, f hub.File, h []byte) error {
	if h == nil {
		var err error
		if h, err = fetchHeader(ctx, c, repo, commit, f); err != nil {
			return err
		}
	}
	// The header, then a hole up to the shard's size.
	path := placeholderPath(modelDir, f.Path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	w, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer w.Abort()
	if _, err := w.WriteAt(h, 0); err != nil {
		return err
	}
	if err := w.Truncate(f.Size); err != nil {
		return err
	}
	return w.Commit()
}

// readPrefix reads the safetensors header at the start of f, a file of
// size bytes, length prefix included.
func readPrefix(f *os.File, size int64) ([]byte, error) {
	var n [8]byte
	if _, err := f.ReadAt(n[:], 0); err != nil {
		return nil, err
	}
	l := binary.LittleEndian.Uint64(n[:])
	if l > container.MaxHeaderBytes || int64(l) > size-8 {
		return nil, fmt.Errorf("%s: header length %d does not fit", f.Name(), l)
	}
	b := make([]byte, 8+l)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// hubFile is the hub's description of a planned file.
func hubFile(f download.PlannedFile) hub.File {
	hf := hub.File{Path: f.Path, Size: f.Size}
	if f.LFS {
		hf.SHA256 = f.Etag
	} else {
		hf.BlobID = f.Etag
	}
	return hf
}
