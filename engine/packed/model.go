package packed

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/fingerprint"
)

// Summary is what Convert or Unpack did to a whole model.
type Summary struct {
	Shards []ShardResult
	// DiskBefore and DiskAfter are the disk space the model directory's
	// files took before and after (allocated blocks, as du counts them).
	DiskBefore, DiskAfter int64
}

// Convert converts the model in dir in place, shard by shard (holding the
// directory's Lock, so that no engine has it open): each
// shard's pack written and verified, then, with opts.Release, its raw
// expert bytes released. It resumes an interrupted conversion where it
// stopped; a shard already converted is left alone. The first run writes
// the directory's record, with every shard's SHA-256 (which Unpack checks
// the restored files against) taken as fp says: from the Hugging Face
// cache's blob names, the fingerprint store, or by reading the shard.
// Releasing refuses shards that are links: a file shared with other tools
// (the Hugging Face cache's blobs) must keep its bytes.
func Convert(ctx context.Context, dir string, opts Options, fp fingerprint.Options, onShard func(ShardResult)) (Summary, error) {
	var sum Summary
	unlock, err := Lock(dir)
	if err != nil {
		return sum, err
	}
	defer unlock()
	cfg, err := config.Load(dir)
	if err != nil {
		return sum, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return sum, err
	}
	defer c.Close()
	if sum.DiskBefore, err = DiskUsage(dir); err != nil {
		return sum, err
	}
	rec, err := ReadRecord(dir)
	if err != nil {
		return sum, err
	}
	if rec == nil {
		if rec, err = newRecord(ctx, dir, c, opts.Release, fp); err != nil {
			return sum, err
		}
	} else if err := rec.matches(c); err != nil {
		return sum, fmt.Errorf("packed: %s: %w", dir, err)
	}
	if opts.Release {
		if err := rec.fillDigests(ctx, dir, fp); err != nil {
			return sum, err
		}
	}
	if opts.Release && rec.KeepOriginal {
		return sum, fmt.Errorf("packed: %s keeps the original files for other tools: its raw experts are not released "+
			"(the packs beside them are read)", dir)
	}
	for _, f := range rec.Files {
		if f.Stage == Absent {
			return sum, fmt.Errorf("packed: %s is still being downloaded (%s is missing): finish the download first", dir, f.Name)
		}
	}
	if opts.Release {
		for _, sh := range c.Shards() {
			if fi, err := os.Lstat(filepath.Join(dir, sh.Name)); err != nil {
				return sum, fmt.Errorf("packed: %w", err)
			} else if fi.Mode()&os.ModeSymlink != 0 {
				return sum, fmt.Errorf("packed: %s is a link to a file other tools may read (%s): its bytes are not released in place; "+
					"pack without releasing, or move the model into Spool's store", sh.Name, dir)
			}
		}
	}
	cv := NewConverter(dir, c, cfg, rec, opts)
	for _, sh := range c.Shards() {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		r, err := cv.Shard(ctx, sh.Name)
		if err != nil && !(errors.Is(err, ErrCannotRelease) && r.Stage == Packed) {
			return sum, err
		}
		sum.Shards = append(sum.Shards, r)
		if onShard != nil {
			onShard(r)
		}
		if err != nil {
			// The volume cannot release: the packs are read, the raw
			// bytes stay, and the other shards would fail the same way.
			cv.opts.Release = false
		}
	}
	if sum.DiskAfter, err = DiskUsage(dir); err != nil {
		return sum, err
	}
	return sum, nil
}

// newRecord lists the shards of c as present, with their SHA-256 when
// they are to be released, and writes the record.
func newRecord(ctx context.Context, dir string, c *container.Container, withDigests bool, fp fingerprint.Options) (*Record, error) {
	rec := &Record{}
	var paths []string
	for _, sh := range c.Shards() {
		rec.Files = append(rec.Files, File{Name: sh.Name, Size: sh.Size, Stage: Present, Shard: true})
		paths = append(paths, filepath.Join(dir, sh.Name))
	}
	if withDigests {
		files, err := fingerprint.Files(ctx, paths, fp)
		if err != nil {
			return nil, fmt.Errorf("packed: the shards' SHA-256, which unpacking checks against: %w", err)
		}
		for i, f := range files {
			rec.Files[i].SHA256 = hex.EncodeToString(f.SHA256[:])
		}
	}
	if err := rec.Write(dir); err != nil {
		return nil, err
	}
	return rec, nil
}

// fillDigests takes the SHA-256 of every shard whose raw bytes are all
// still in place and whose digest the record lacks, and writes the record.
func (r *Record) fillDigests(ctx context.Context, dir string, fp fingerprint.Options) error {
	var idx []int
	var paths []string
	for i, f := range r.Files {
		if f.Shard && f.SHA256 == "" && (f.Stage == Present || f.Stage == Packed) {
			idx = append(idx, i)
			paths = append(paths, filepath.Join(dir, f.Name))
		}
	}
	if len(idx) == 0 {
		return nil
	}
	files, err := fingerprint.Files(ctx, paths, fp)
	if err != nil {
		return fmt.Errorf("packed: the shards' SHA-256, which unpacking checks against: %w", err)
	}
	for k, i := range idx {
		r.Files[i].SHA256 = hex.EncodeToString(files[k].SHA256[:])
	}
	return r.Write(dir)
}

// matches checks that the record lists exactly c's shards, at their sizes.
func (r *Record) matches(c *container.Container) error {
	n := 0
	for _, f := range r.Files {
		if f.Shard {
			n++
		}
	}
	for _, sh := range c.Shards() {
		f, ok := r.File(sh.Name)
		if !ok || !f.Shard {
			return fmt.Errorf("%s is not in %s", sh.Name, RecordName)
		}
		if f.Size != sh.Size {
			return fmt.Errorf("%s has %d bytes, %s says %d", sh.Name, sh.Size, RecordName, f.Size)
		}
	}
	if n != len(c.Shards()) {
		return fmt.Errorf("%s lists %d shards, the directory has %d", RecordName, n, len(c.Shards()))
	}
	return nil
}

// DiskUsage is the disk space the files of dir take (allocated blocks,
// links not followed), as du counts it.
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			n, err := diskioAllocated(path)
			total += n
			return err
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("packed: %w", err)
	}
	return total, nil
}

// VerifyResult is one pack's check.
type VerifyResult struct {
	Shard, Pack string
	Released    bool // checked against its checksums only: the raw bytes are gone
	Experts     int  // records that passed
	Err         error
}

// Verify checks every pack of the model in dir as the disk holds it: each
// record decodes to bytes with its checksum and, where the raw bytes are
// still in the shards, to exactly those bytes.
func Verify(ctx context.Context, dir string, onPack func(VerifyResult)) ([]VerifyResult, error) {
	unlock, err := Use(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rec, err := ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	var out []VerifyResult
	for _, sh := range c.Shards() {
		path := expertpack.PackPath(filepath.Join(dir, sh.Name))
		released := rec.Released(sh.Name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !released {
			continue
		}
		r := VerifyResult{Shard: sh.Name, Pack: path, Released: released}
		x, err := expertpack.ReadIndex(path)
		if err == nil {
			if err = x.Check(dir); err != nil {
				err = fmt.Errorf("%s: %w", path, err)
			}
		}
		if err == nil {
			r.Experts, err = expertpack.VerifyPack(ctx, c, cfg, path, x, !released)
		}
		if cerr := ctx.Err(); cerr != nil {
			return out, cerr
		}
		r.Err = err
		out = append(out, r)
		if onPack != nil {
			onPack(r)
		}
	}
	return out, nil
}

// TypicalRatio is what the experts of trained int4 models pack to: gen-bench's
// trained-like codes (--codes normal) at 0.775, GLM-5.2's census at 0.76. The
// speed of a model not packed yet (a download) is predicted at it.
const TypicalRatio = 0.775

// ReadBytes is what reading one routed expert of the main layers moves,
// on average, from the model in dir as Spool reads it: its pack record
// where a current pack holds it, else its raw bytes. Packed counts the
// experts in packs out of Experts.
type ReadBytes struct {
	Mean            float64
	Raw             float64 // the mean raw bytes
	Packed, Experts int
}

// ReadBytesOf measures ReadBytes of the model in dir (open as c, config cfg).
func ReadBytesOf(c *container.Container, cfg *config.Config) (ReadBytes, error) {
	var rb ReadBytes
	var read, raw float64
	packs := map[string]*expertpack.Index{}
	for _, sh := range c.Shards() {
		if x, err := expertpack.ReadIndex(expertpack.PackPath(filepath.Join(c.Dir(), sh.Name))); err == nil && x.Check(c.Dir()) == nil {
			packs[sh.Name] = x
		}
	}
	for _, l := range cfg.SparseLayers() {
		for e := 0; e < cfg.NumRoutedExperts; e++ {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return rb, fmt.Errorf("packed: %w", err)
			}
			rb.Experts++
			raw += float64(loc.Bytes())
			if x := packs[loc.Weights[0].File]; x != nil {
				if ent, ok := x.Lookup(l, e); ok {
					read += float64(ent.Length)
					rb.Packed++
					continue
				}
			}
			read += float64(loc.Bytes())
		}
	}
	if rb.Experts > 0 {
		rb.Mean, rb.Raw = read/float64(rb.Experts), raw/float64(rb.Experts)
	}
	return rb, nil
}
