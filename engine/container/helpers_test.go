package container

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
)

// fixtures returns ../shared/fixtures relative to the module root, skipping
// the test when it is absent.
func fixtures(t testing.TB) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

// openFixture opens a fixture model and loads its config.
func openFixture(t testing.TB, model string) (*Container, *config.Config) {
	t.Helper()
	return openDir(t, filepath.Join(fixtures(t), model))
}

func openDir(t testing.TB, dir string) (*Container, *config.Config) {
	t.Helper()
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg
}

// mutation rewrites the tensor list of one shard of a copied model.
type mutation func(ts []Tensor) []Tensor

// copyModel copies a fixture model into a temporary directory, rewriting
// each shard named in muts through the Writer after applying its mutation.
// A nil mutation removes the shard.
func copyModel(t *testing.T, model string, muts map[string]mutation) string {
	t.Helper()
	src := filepath.Join(fixtures(t), model)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		mut, mutated := muts[name]
		if mutated && mut == nil {
			continue
		}
		if !mutated {
			raw, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, name), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ts := readShard(t, filepath.Join(src, name))
		if err := writeFile(filepath.Join(dst, name), mut(ts), nil); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// readShard reads every tensor of one safetensors file in offset order.
func readShard(t *testing.T, path string) []Tensor {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(binary.LittleEndian.Uint64(raw))
	h, err := parseHeader(raw[8:8+n], int64(len(raw))-8-n)
	if err != nil {
		t.Fatal(err)
	}
	var out []Tensor
	for _, ht := range h.Tensors {
		out = append(out, Tensor{
			TensorSpec: TensorSpec{Name: ht.Name, DType: ht.DType, Shape: ht.Shape},
			Data:       raw[8+n+ht.Begin : 8+n+ht.End],
		})
	}
	return out
}

// drop removes the named tensors.
func drop(names ...string) mutation {
	return func(ts []Tensor) []Tensor {
		var out []Tensor
		for _, t := range ts {
			keep := true
			for _, n := range names {
				keep = keep && t.Name != n
			}
			if keep {
				out = append(out, t)
			}
		}
		return out
	}
}

// resize replaces a tensor's payload by one of n bytes (1-D U8) or, for
// F32 tensors, n float32 zeros.
func resize(name string, n int) mutation {
	return func(ts []Tensor) []Tensor {
		out := append([]Tensor(nil), ts...)
		for i, t := range out {
			if t.Name != name {
				continue
			}
			size, _ := DTypeSize(t.DType)
			out[i].Shape = []int64{int64(n)}
			out[i].Data = make([]byte, int64(n)*size)
		}
		return out
	}
}

func f32Bytes(vs ...float32) []byte {
	out := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// writeRaw writes a safetensors file from a raw header and data section.
func writeRaw(t *testing.T, path string, hdr string, data []byte) {
	t.Helper()
	b := make([]byte, 8, 8+len(hdr)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
	b = append(b, hdr...)
	b = append(b, data...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
