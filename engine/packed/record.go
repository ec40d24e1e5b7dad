package packed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spoolhq/spool/internal/atomicfile"
)

// RecordName is the record's file name in a model directory.
const RecordName = "spool-model.json"

// recordFormat is the record's format version.
const recordFormat = 1

// Stage is where one file stands.
type Stage string

const (
	// Absent: not downloaded yet (a placeholder with its header may stand
	// in its place).
	Absent Stage = "absent"
	// Present: its raw bytes are in place and verified.
	Present Stage = "present"
	// Packed: its pack is written, synced and every record decoded back
	// from the disk; the raw bytes are still in place.
	Packed Stage = "packed"
	// Releasing: the raw bytes of its pack's experts are being released;
	// some may be gone.
	Releasing Stage = "releasing"
	// Released: its pack's experts exist only in the pack.
	Released Stage = "released"
)

// Origin is where a model's files came from.
type Origin struct {
	Endpoint string `json:"endpoint,omitempty"` // the hub's URL ("" for the default)
	Repo     string `json:"repo"`
	Revision string `json:"revision,omitempty"`
	Commit   string `json:"commit"`
}

// File is one file of the directory.
type File struct {
	// Name is the file's path in the directory, slash-separated.
	Name string `json:"name"`
	Size int64  `json:"size"`
	// SHA256 is the digest of the file's original bytes, in hex ("" when
	// not known: a small file listed by its git blob id).
	SHA256 string `json:"sha256,omitempty"`
	// Etag is the file's blob name on the hub (LFS sha256 or git blob id).
	Etag  string `json:"etag,omitempty"`
	Stage Stage  `json:"stage"`
	// Shard is true for safetensors files.
	Shard bool `json:"shard,omitempty"`
}

// Record is a model directory's spool-model.json.
type Record struct {
	Format int     `json:"format"`
	Origin *Origin `json:"origin,omitempty"`
	// KeepOriginal says the raw files are kept for other tools (the
	// shards are links into the Hugging Face cache): packs are read, and
	// nothing is released.
	KeepOriginal bool   `json:"keep_original,omitempty"`
	Files        []File `json:"files"`
}

// ReadRecord reads dir's record; it returns nil, nil when dir has none (a
// plain model directory).
func ReadRecord(dir string) (*Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, RecordName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("packed: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("packed: %s is damaged (%v): its files' state is unknown; "+
			"restore it from a backup or fetch the model again", filepath.Join(dir, RecordName), err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("packed: %s: %w", filepath.Join(dir, RecordName), err)
	}
	return &r, nil
}

func (r *Record) validate() error {
	if r.Format != recordFormat {
		return fmt.Errorf("record format %d; this Spool reads format %d", r.Format, recordFormat)
	}
	seen := map[string]bool{}
	for _, f := range r.Files {
		if f.Name == "" || f.Name != filepath.ToSlash(filepath.Clean(filepath.FromSlash(f.Name))) ||
			strings.HasPrefix(f.Name, "../") || f.Name == ".." || filepath.IsAbs(filepath.FromSlash(f.Name)) || f.Size < 0 {
			return fmt.Errorf("file %q of %d bytes", f.Name, f.Size)
		}
		if seen[f.Name] {
			return fmt.Errorf("file %q listed twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Stage {
		case Absent, Present:
		case Packed, Releasing, Released:
			if !f.Shard {
				return fmt.Errorf("%s is %s but not a shard", f.Name, f.Stage)
			}
		default:
			return fmt.Errorf("%s has stage %q", f.Name, f.Stage)
		}
	}
	return nil
}

// Write replaces dir's record, atomically and durably.
func (r *Record) Write(dir string) error {
	r.Format = recordFormat
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("packed: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, RecordName), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("packed: writing the record: %w", err)
	}
	return nil
}

// File finds a file by name.
func (r *Record) File(name string) (*File, bool) {
	if r == nil {
		return nil, false
	}
	i := slices.IndexFunc(r.Files, func(f File) bool { return f.Name == name })
	if i < 0 {
		return nil, false
	}
	return &r.Files[i], true
}

// Released reports whether the raw bytes of the experts in name's pack
// may be gone (released, or being released).
func (r *Record) Released(name string) bool {
	if r == nil {
		return false
	}
	f, ok := r.File(name)
	return ok && (f.Stage == Released || f.Stage == Releasing)
}

// Ready says whether the model can be opened: every file is in place and
// no release was interrupted. The error says what to do.
func (r *Record) Ready(dir string) error {
	if r == nil {
		return nil
	}
	var absent, releasing []string
	for _, f := range r.Files {
		switch f.Stage {
		case Absent:
			absent = append(absent, f.Name)
		case Releasing:
			releasing = append(releasing, f.Name)
		}
	}
	switch {
	case len(absent) > 0:
		return fmt.Errorf("%w: %s is still being downloaded (%d of %d files to go, %s first); "+
			"finish the download (spool pull, or the app's Model page) before loading it",
			ErrNotReady, dir, len(absent), len(r.Files), absent[0])
	case len(releasing) > 0:
		return fmt.Errorf("%w: packing %s was interrupted while %s's raw experts were being released; "+
			"run spool pack --model %s to finish", ErrNotReady, dir, releasing[0], dir)
	}
	return nil
}

// ErrNotReady is wrapped by Ready's errors.
var ErrNotReady = errors.New("the model is not ready")

// AllFiles lists the record's files (none for a nil record).
func (r *Record) AllFiles() []File {
	if r == nil {
		return nil
	}
	return r.Files
}
