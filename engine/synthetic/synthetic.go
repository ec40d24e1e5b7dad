package synthetic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/internal/atomicfile"
)

// Real GLM-5.2 per-expert sizes on disk (weights plus scales).
const (
	ExpertBytesInt4Row     = 18_915_328
	ExpertBytesInt4Group64 = 21_233_664
	ExpertBytesMTPInt8     = 37_789_696
)

// Options describe the model to write.
type Options struct {
	// SparseLayers is the number of routed-expert layers after the one
	// dense layer (default 2). Not used with SparseFiles.
	SparseLayers int
	// Experts is the number of routed experts per layer (default 256, at
	// least experts_per_tok = 8). Not used with SparseFiles.
	Experts int
	// GroupSize is the int4 scale group: 0 for one scale per row (the
	// pinned public artifact) or 64.
	GroupSize int
	// Codes draws the routed experts' int4 codes (default uniform).
	Codes Codes
	// Seed makes the values; the same options and seed write the same
	// bytes.
	Seed uint64
	// SparseFiles writes the full 78-layer, 256-expert, MTP-carrying
	// skeleton of GLM-5.2 whose headers are true: the tensors a prompt's
	// routing depends on (the embedding, the norms, the routers and their
	// correction biases, about 1.4 GB) get seeded values, so that a prompt
	// spreads over the experts as a trained model's does; every other
	// payload (the experts, the big matrices) is a hole: the files have
	// their real sizes, use little disk, and the holes read as zeros.
	SparseFiles bool
	// MTP adds an MTP layer with GLM-5.2's storage (int8 per row, routed
	// experts of ExpertBytesMTPInt8) to a small model, whose drafts are
	// accepted about MTPAcceptance (0..1) of the time: the seed picks
	// which tokens' drafts miss. The main model then continues any prompt
	// along a seeded cycle through the vocabulary (a new token every step),
	// whatever MTPAcceptance. Not used with SparseFiles, whose MTP layer
	// is GLM-5.2's.
	MTP           bool
	MTPAcceptance float64
	// expertHoles leaves every routed expert's payload a hole but the loud
	// MTP experts': for tests of what the rest decides.
	expertHoles bool
	// allHoles makes SparseFiles leave every payload a hole (the routers
	// then tie on the same experts): for tests of the headers alone.
	allHoles bool
	// OnShard, when set, is called after each shard is complete with its
	// file name and size.
	OnShard func(name string, bytes int64)
}

// Result describes what Generate wrote.
type Result struct {
	Dir string
	// Files lists the files written: the shards, tokenizer.json, and
	// config.json last.
	Files []string
	// Bytes is the shards' total size (apparent size for SparseFiles).
	Bytes int64
	// PayloadBytes is the bytes of tensor data actually written (for
	// SparseFiles, the routing tensors').
	PayloadBytes int64
	Tensors      int
	// ExpertLayers and ExpertsPerLayer count the routed experts (the MTP
	// layer included in ExpertLayers).
	ExpertLayers    int
	ExpertsPerLayer int
	// ExpertBytes is one decoder-layer expert's size on disk.
	ExpertBytes int64
}

// MaxSparseLayers bounds SparseLayers (the config allows 256 layers).
const MaxSparseLayers = 255

func (o *Options) normalize() error {
	if o.GroupSize != 0 && o.GroupSize != 64 {
		return fmt.Errorf("synthetic: group size %d is not supported (0 for per-row scales, or 64)", o.GroupSize)
	}
	if !(o.MTPAcceptance >= 0 && o.MTPAcceptance <= 1) {
		return fmt.Errorf("synthetic: MTP acceptance %g is outside 0..1", o.MTPAcceptance)
	}
	if o.MTPAcceptance != 0 && !o.MTP {
		return errors.New("synthetic: an MTP acceptance without an MTP layer")
	}
	if o.SparseFiles {
		if o.MTP {
			return errors.New("synthetic: the sparse-files skeleton has GLM-5.2's MTP layer (its payload holes); a bench MTP layer is for the small models")
		}
		if o.SparseLayers != 0 || o.Experts != 0 {
			return errors.New("synthetic: the sparse-files skeleton has GLM-5.2's 75 sparse layers of 256 experts; leave SparseLayers and Experts unset")
		}
		return nil
	}
	if o.SparseLayers == 0 {
		o.SparseLayers = 2
	}
	if o.Experts == 0 {
		o.Experts = 256
	}
	if o.SparseLayers < 1 || o.SparseLayers > MaxSparseLayers {
		return fmt.Errorf("synthetic: %d sparse layers is out of range (1..%d)", o.SparseLayers, MaxSparseLayers)
	}
	if o.Experts < 8 || o.Experts > 4096 {
		return fmt.Errorf("synthetic: %d experts per layer is out of range (8..4096; 8 are routed per token)", o.Experts)
	}
	return nil
}

// Generate writes the model into dir, which must be absent or empty. Each
// shard appears under its name only once complete, and config.json is
// written last, so an interrupted run never leaves a directory that loads.
func Generate(ctx context.Context, dir string, opts Options) (*Result, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	return writeModel(ctx, dir, modelConfig(&opts), opts)
}

// writeModel writes the model of cfg (GLM-5.2's or a small one) into the
// prepared dir.
func writeModel(ctx context.Context, dir string, cfg *config.Config, opts Options) (*Result, error) {
	cfgJSON, err := cfg.Encode()
	if err != nil {
		return nil, err
	}
	int4 := int4Row
	res := &Result{Dir: dir, ExpertBytes: ExpertBytesInt4Row, ExpertsPerLayer: cfg.NumRoutedExperts}
	if opts.GroupSize == 64 {
		int4, res.ExpertBytes = int4Group64, ExpertBytesInt4Group64
	}
	shards := layout(cfg, int4)
	res.ExpertLayers = expertLayers(cfg)
	meta := map[string]string{
		"format":      "pt",
		"spool_bench": fmt.Sprintf("seed=%d group_size=%d sparse_files=%t", opts.Seed, opts.GroupSize, opts.SparseFiles),
	}
	if opts.Codes == CodesNormal {
		useNormalCodes(shards, cfg)
		meta["spool_bench"] += " codes=normal"
	}
	if opts.MTP {
		useBenchMTP(shards, cfg, &opts)
		meta["spool_bench"] += fmt.Sprintf(" mtp_acceptance=%g", opts.MTPAcceptance)
	}
	if opts.expertHoles {
		for i := range shards {
			for j := range shards[i].tensors {
				t := &shards[i].tensors[j]
				t.hole = strings.Contains(t.name, ".mlp.experts.") && !t.loud
			}
		}
	}
	h := holesNone
	switch {
	case opts.SparseFiles && opts.allHoles:
		h = holesAll
	case opts.SparseFiles:
		h = holesRouting
		seedBiases(shards)
		meta["spool_bench"] += " routing=seeded"
	}
	for _, s := range shards {
		path := filepath.Join(dir, s.name)
		n, written, err := writeShard(ctx, path, s.tensors, meta, opts.Seed, h)
		if err != nil {
			return nil, err
		}
		if opts.OnShard != nil {
			opts.OnShard(s.name, n)
		}
		res.Files = append(res.Files, s.name)
		res.Bytes += n
		res.Tensors += len(s.tensors)
		res.PayloadBytes += written
	}
	tok, err := tokenizerJSON(cfg)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, "tokenizer.json"), tok); err != nil {
		return nil, err
	}
	res.Files = append(res.Files, "tokenizer.json")
	if err := writeFileAtomic(filepath.Join(dir, "config.json"), cfgJSON); err != nil {
		return nil, err
	}
	res.Files = append(res.Files, "config.json")
	return res, nil
}

// prepareDir creates dir or checks that it is empty: a generated model
// must not mix with the shards of another.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("synthetic: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("synthetic: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("synthetic: %s is not empty (%d entries); write into a new directory", dir, len(entries))
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("synthetic: %w", err)
	}
	return nil
}
