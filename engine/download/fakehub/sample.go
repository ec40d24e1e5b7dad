package fakehub

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
)

// SampleRepo returns a repository shaped like a sharded safetensors model:
// one LFS shard per size in shardSizes (random bytes from seed), a
// config.json, a tokenizer file in a subdirectory, two files with the same
// content (they share one blob) and an empty file. Its commit is derived
// from seed and "main" names it.
func SampleRepo(id string, seed uint64, shardSizes ...int) Repo {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	commit := sha1.Sum(fmt.Appendf(nil, "%s@%d", id, seed))
	r := Repo{ID: id, Commit: hex.EncodeToString(commit[:]), Branches: []string{"main"}}
	r.Files = append(r.Files,
		File{Path: "config.json", Data: fmt.Appendf(nil, `{"model_type":"fake","seed":%d}`+"\n", seed)},
		File{Path: "tokenizer/tokenizer.json", Data: random(20000)},
		File{Path: "LICENSE", Data: []byte("same bytes\n")},
		File{Path: "docs/LICENSE.copy", Data: []byte("same bytes\n")},
		File{Path: "empty.txt", Data: nil},
	)
	for i, n := range shardSizes {
		r.Files = append(r.Files, File{
			Path: fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shardSizes)),
			Data: random(n),
			LFS:  true,
		})
	}
	return r
}

// Size is the sum of the repository's file sizes.
func (r Repo) Size() int64 {
	var n int64
	for _, f := range r.Files {
		n += int64(len(f.Data))
	}
	return n
}
