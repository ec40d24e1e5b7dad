package promptcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/loader"
)

// FormatVersion is the version of the block file format. Files of another
// version are deleted when met.
const FormatVersion = 1

// Hash is a block's chain hash, or an identity's digest.
type Hash [sha256.Size]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Identity names the computation whose state a cache holds. Blocks are
// reused only by a cache of the same identity and block size; a block file
// that carries another is deleted, never loaded.
//
// The model is identified by content, not by a revision name: Container is
// a digest of every shard's header (tensor names, dtypes, shapes, offsets,
// sizes and metadata) and Weights one of every shard's bytes
// (engine/fingerprint), so a renamed or re-downloaded copy of the same
// artifact keeps its cache, and a re-converted one, or one with the same
// layout and other weights (a fine-tune, a re-published checkpoint), does
// not.
type Identity struct {
	// Name labels the model in log lines (not part of the digest).
	Name      string
	Container Hash // digest of the container's headers
	Weights   Hash // digest of the shards' bytes (loader.Dir.Fingerprint)
	Config    Hash // digest of config.json
	Tokenizer Hash // digest of tokenizer.json (zero when the model has none)
	// Engine is the engine build whose numerics computed the state (a
	// version or commit): a build with other kernels may round differently,
	// so its blocks are not mixed in.
	Engine string
	// Geometry is what a token stores (its MTP flag is ignored: blocks say
	// whether they carry MTP rows). A bfloat16 cache's state differs from
	// a float32 one's past the first layer, so its blocks are its own.
	Geometry kvcache.Geometry
	// Hidden is the model's hidden size, the width of the hidden state a
	// block keeps for the MTP layer.
	Hidden int
}

// IdentityOf computes the identity of a loaded model directory; engine
// names the build (see Identity.Engine) and weights says where the
// shards' digests are remembered (the first identity of a model outside
// the Hugging Face cache reads its weights once).
func IdentityOf(ctx context.Context, d *loader.Dir, engine string, weights fingerprint.Options) (Identity, error) {
	if d.Model == nil {
		return Identity{}, fmt.Errorf("promptcache: identity of %s: the model is not loaded", d.Path)
	}
	id := Identity{
		Name:      filepath.Base(filepath.Clean(d.Path)),
		Container: containerDigest(d),
		Engine:    engine,
		Geometry:  d.Model.CacheGeometry(),
		Hidden:    d.Config.HiddenSize,
	}
	fp, err := d.Fingerprint(ctx, weights)
	if err != nil {
		return Identity{}, fmt.Errorf("promptcache: identity of %s: %w", d.Path, err)
	}
	id.Weights = Hash(fp)
	if id.Config, err = fileDigest(filepath.Join(d.Path, "config.json"), false); err != nil {
		return Identity{}, err
	}
	if id.Tokenizer, err = fileDigest(filepath.Join(d.Path, "tokenizer.json"), true); err != nil {
		return Identity{}, err
	}
	return id, nil
}

func fileDigest(path string, optional bool) (Hash, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if optional && os.IsNotExist(err) {
			return Hash{}, nil
		}
		return Hash{}, fmt.Errorf("promptcache: identity: %w", err)
	}
	return sha256.Sum256(raw), nil
}

// containerDigest hashes every shard's header as the container indexed it.
func containerDigest(d *loader.Dir) Hash {
	h := sha256.New()
	for _, s := range d.Container.Shards() {
		writeString(h, s.Name)
		writeInt(h, s.Size)
		keys := make([]string, 0, len(s.Metadata))
		for k := range s.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			writeString(h, k)
			writeString(h, s.Metadata[k])
		}
	}
	for _, name := range d.Container.Names() {
		t, _ := d.Container.Tensor(name)
		writeString(h, t.Name)
		writeString(h, t.DType)
		writeInt(h, int64(len(t.Shape)))
		for _, n := range t.Shape {
			writeInt(h, n)
		}
		writeString(h, t.File)
		writeInt(h, t.Offset)
		writeInt(h, t.Size)
	}
	return Hash(h.Sum(nil))
}

// digest is the identity's hash together with the block size and format
// version: the root of every chain hash and the identity a block file
// carries.
func (id Identity) digest(blockTokens int) Hash {
	h := sha256.New()
	writeString(h, "spool prompt cache")
	writeInt(h, FormatVersion)
	writeInt(h, int64(blockTokens))
	h.Write(id.Container[:])
	h.Write(id.Weights[:])
	h.Write(id.Config[:])
	h.Write(id.Tokenizer[:])
	writeString(h, id.Engine)
	g := id.Geometry
	for _, v := range []int{g.Layers, g.KVLora, g.Rope, g.IndexDim, len(g.Indexer), id.Hidden} {
		writeInt(h, int64(v))
	}
	for _, b := range g.Indexer {
		if b {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	if g.BF16 {
		writeString(h, "kv bfloat16") // float32 identities stay as they were
	}
	return Hash(h.Sum(nil))
}

func writeInt(h hash.Hash, v int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	h.Write(b[:])
}

func writeString(h hash.Hash, s string) {
	writeInt(h, int64(len(s)))
	h.Write([]byte(s))
}

// chainHashes returns the chain hash of every full block of tokens: block
// k's hash covers its parent's hash (root for block 0) and its own token ids,
// so equal hashes mean equal prefixes.
func chainHashes(root Hash, tokens []int, blockTokens int) []Hash {
	n := len(tokens) / blockTokens
	out := make([]Hash, n)
	buf := make([]byte, 0, sha256.Size+4*blockTokens)
	parent := root
	for k := range n {
		buf = append(buf[:0], parent[:]...)
		for _, t := range tokens[k*blockTokens : (k+1)*blockTokens] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		out[k] = sha256.Sum256(buf)
		parent = out[k]
	}
	return out
}
