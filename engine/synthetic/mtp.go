package synthetic

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
)

// A bench model's MTP layer (Options.MTP) has the real artifact's storage
// (int8 per row, routed experts of 37,789,696 bytes) and drafts that are
// accepted about Options.MTPAcceptance of the time, by construction:
//
//   - the main model's lm_head row π(t) holds the embedding codes of token
//     t, for a seeded cycle π through the vocabulary's ordinary tokens, so
//     the logit of π(t) after token t outweighs every other (a dot product
//     of the embedding with itself against ones with unrelated rows): the
//     greedy continuation walks the cycle, a new token every step, and its
//     routing spreads as a trained model's does;
//   - the MTP layer's eh_proj passes the next token's normed embedding
//     through unchanged (identity on its embedding half, zero on its hidden
//     half), so that the layer's output, put through the same lm_head,
//     drafts π(next): the main model's next token;
//   - a seeded set of the MTP layer's routed experts is loud (their
//     down_proj scales times mtpLoudGain): a draft whose token routes to one
//     of them is drowned in its output and misses. The set is sized so that
//     a token's ExpertsPerToken experts avoid it with probability
//     MTPAcceptance: none for 1, every expert for 0.
//
// Drafts cost what they cost on GLM-5.2 (the MTP layer's attention, its
// shared expert and ExpertsPerToken routed experts of the real size); only
// whether they are accepted is chosen.

// mtpLoudGain multiplies a loud MTP expert's down_proj scales: its output
// then has elements about a hundred times the embedding's, far past what
// the embedding's match in the lm_head can outweigh.
const mtpLoudGain = 1000

// bigramSalt and loudSalt seed the cycle and the loud experts, apart from
// every tensor's values.
const (
	bigramSalt = "spool-bench-mtp-bigram"
	loudSalt   = "spool-bench-mtp-loud"
)

// bigramRows fills the lm_head of a bench model with an MTP layer: row
// src[v] of the embedding's codes where src[v] >= 0, the usual random
// codes elsewhere.
type bigramRows struct {
	src   []int32 // per lm_head row: the token whose embedding codes it copies, or -1
	embed []byte  // the embedding's int8 codes, [vocab × hidden]
	cols  int64
}

// saltRNG is a generator for one of the MTP layer's seeded choices.
func saltRNG(seed uint64, salt string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(salt))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// loudExperts is how many of e experts are loud so that k of them, picked
// at random, avoid all the loud ones with probability about accept.
func loudExperts(e, k int, accept float64) int {
	if accept >= 1 {
		return 0
	}
	if accept <= 0 {
		return e
	}
	return min(e, int(math.Round(float64(e)*(1-math.Pow(accept, 1/float64(k))))))
}

// useBenchMTP turns the MTP layer of a small model's shards into the bench
// MTP layer: the lm_head's bigram rows, eh_proj's identity and the loud
// experts (see the comment above).
func useBenchMTP(shards []shardSpec, c *config.Config, o *Options) {
	H, V := c.HiddenSize, c.VocabSize
	L := c.NumLayers // the MTP layer's index
	rng := saltRNG(o.Seed, bigramSalt)
	// The cycle runs through the ordinary tokens (below the end tokens,
	// which the walk then never reaches).
	ordinary := min(V, minInt(c.EOSTokenIDs))
	order := rng.Perm(ordinary)
	src := make([]int32, V)
	for i := range src {
		src[i] = -1
	}
	for i, t := range order {
		src[order[(i+1)%len(order)]] = int32(t) // π(t) = the next token of the cycle
	}
	loud := map[int]bool{}
	for _, e := range saltRNG(o.Seed, loudSalt).Perm(c.NumRoutedExperts)[:loudExperts(c.NumRoutedExperts, c.ExpertsPerToken, o.MTPAcceptance)] {
		loud[e] = true
	}
	eh := fmt.Sprintf("model.layers.%d.eh_proj.weight", L)
	for i := range shards {
		ts := shards[i].tensors
		for j := range ts {
			t := &ts[j]
			switch {
			case t.name == "lm_head.weight":
				t.fill, t.row = fillBigram, int64(H)
				t.bigram = &bigramRows{src: src, embed: embedCodes(c, o.Seed), cols: int64(H)}
			case t.name == eh:
				t.fill, t.row = fillEye, int64(2*H)
			case t.name == eh+container.ScalesSuffix:
				t.fill, t.base = fillConst, 1.0/127
			}
		}
		for e := range loud {
			prefix := fmt.Sprintf("model.layers.%d.mlp.experts.%d.", L, e)
			down := container.ExpertName(L, e, "down_proj") + container.ScalesSuffix
			for j := range ts {
				if strings.HasPrefix(ts[j].name, prefix) {
					ts[j].loud = true
				}
				if ts[j].name == down {
					ts[j].base *= mtpLoudGain
				}
			}
		}
	}
}

// embedCodes regenerates the embedding's int8 codes (as writePayload
// draws them) for the lm_head's bigram rows.
func embedCodes(c *config.Config, seed uint64) []byte {
	w, _ := quantized("model.embed_tokens.weight", c.VocabSize, c.HiddenSize, int8Row)
	codes := make([]byte, w.size)
	fillChunk(codes, w, tensorRNG(seed, w.name), 0)
	return codes
}

// fill writes the bigram rows of chunk, which holds rows from row on and
// has been filled with random codes.
func (b *bigramRows) fill(chunk []byte, row int64) {
	for i := int64(0); i*b.cols < int64(len(chunk)); i++ {
		if t := b.src[row+i]; t >= 0 {
			copy(chunk[i*b.cols:(i+1)*b.cols], b.embed[int64(t)*b.cols:(int64(t)+1)*b.cols])
		}
	}
}

// fillEyeRows writes rows from row on of an int8 [rows, cols] matrix whose
// row r is 127 at column r and 0 elsewhere (with scales 1/127: the
// identity on the first rows columns).
func fillEyeRows(chunk []byte, cols, row int64) {
	clear(chunk)
	for i := int64(0); i*cols < int64(len(chunk)); i++ {
		chunk[i*cols+row+i] = 127
	}
}

// fillConstF32 writes v into every float of chunk.
func fillConstF32(chunk []byte, v float32) {
	for i := 0; i+4 <= len(chunk); i += 4 {
		binary.LittleEndian.PutUint32(chunk[i:], math.Float32bits(v))
	}
}

func minInt(xs []int) int {
	m := math.MaxInt
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}
