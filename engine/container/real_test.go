package container

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// synthShard lays out a shard the way the Colibri converter does: F32
// tensors first, then U8 tensors, each group sorted by name.
type synthShard struct{ f32, u8 []TensorSpec }

func (s *synthShard) vector(name string, n int) {
	s.f32 = append(s.f32, TensorSpec{name, "F32", []int64{int64(n)}})
}

func (s *synthShard) float(name string, o, i int) {
	s.f32 = append(s.f32, TensorSpec{name, "F32", []int64{int64(o), int64(i)}})
}

// int8 and int4 add a per-row quantized weight and its scales.
func (s *synthShard) int8(name string, o, i int) {
	s.u8 = append(s.u8, TensorSpec{name, "U8", []int64{int64(o * i)}})
	s.vector(name+ScalesSuffix, o)
}

func (s *synthShard) int4(name string, o, i int) {
	s.u8 = append(s.u8, TensorSpec{name, "U8", []int64{int64(o * ((i + 1) / 2))}})
	s.vector(name+ScalesSuffix, o)
}

// write writes the header and extends the file (sparsely) over the data
// section, so only the header occupies disk.
func (s *synthShard) write(t *testing.T, path string) {
	t.Helper()
	byName := func(ts []TensorSpec) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	}
	byName(s.f32)
	byName(s.u8)
	hdr, total, err := encodeHeader(append(s.f32, s.u8...), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 + int64(len(hdr)) + total); err != nil {
		t.Skipf("cannot create a sparse %d byte file: %v", total, err)
	}
}

// TestRealGeometryHeaders validates a header-only replica of the pinned
// public GLM-5.2 artifact (int4 per-row, int8 embedding, lm_head and MTP
// layer, no indexer) and checks the totals published for it.
func TestRealGeometryHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 118,478-tensor header")
	}
	dir := t.TempDir()
	src := filepath.Join(fixtures(t), "glm52-real", "config.json")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	const (
		H, V, L, dense, E, I, D = 6144, 154880, 78, 3, 256, 2048, 12288
		nh, qr, kvr, nope, rope = 64, 2048, 512, 192, 64
		vdim                    = 256
	)
	layer := func(s *synthShard, l int, q func(string, int, int)) {
		p := fmt.Sprintf("model.layers.%d.", l)
		s.vector(p+"input_layernorm.weight", H)
		s.vector(p+"post_attention_layernorm.weight", H)
		s.vector(p+"self_attn.q_a_layernorm.weight", qr)
		s.vector(p+"self_attn.kv_a_layernorm.weight", kvr)
		q(p+"self_attn.q_a_proj.weight", qr, H)
		q(p+"self_attn.q_b_proj.weight", nh*(nope+rope), qr)
		q(p+"self_attn.kv_a_proj_with_mqa.weight", kvr+rope, H)
		q(p+"self_attn.kv_b_proj.weight", nh*(nope+vdim), kvr)
		q(p+"self_attn.o_proj.weight", H, nh*vdim)
		if l < dense {
			q(p+"mlp.gate_proj.weight", D, H)
			q(p+"mlp.up_proj.weight", D, H)
			q(p+"mlp.down_proj.weight", H, D)
			return
		}
		s.float(p+"mlp.gate.weight", E, H)
		s.vector(p+"mlp.gate.e_score_correction_bias", E)
		q(p+"mlp.shared_experts.gate_proj.weight", I, H)
		q(p+"mlp.shared_experts.up_proj.weight", I, H)
		q(p+"mlp.shared_experts.down_proj.weight", H, I)
		for e := range E {
			q(ExpertName(l, e, "gate_proj"), I, H)
			q(ExpertName(l, e, "up_proj"), I, H)
			q(ExpertName(l, e, "down_proj"), H, I)
		}
	}
	var main, mtp synthShard
	main.int8("model.embed_tokens.weight", V, H)
	main.int8("lm_head.weight", V, H)
	main.vector("model.norm.weight", H)
	for l := range L {
		layer(&main, l, main.int4)
	}
	mtp.int8(fmt.Sprintf("model.layers.%d.eh_proj.weight", L), H, 2*H)
	for _, n := range []string{"enorm", "hnorm", "shared_head.norm"} {
		mtp.vector(fmt.Sprintf("model.layers.%d.%s.weight", L, n), H)
	}
	layer(&mtp, L, mtp.int8)
	main.write(t, filepath.Join(dir, "out-00000.safetensors"))
	mtp.write(t, filepath.Join(dir, "out-mtp-00000.safetensors"))

	c, cfg := openDir(t, dir)
	s, err := Validate(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want int64
	}{
		{"tensors", int64(s.Tensors), 118478},
		{"routed experts", int64(s.Experts.Count), 19456},
		{"coalesced experts", int64(s.Experts.Coalesced), 19456},
		{"resident bytes", s.ResidentBytes, 10877286144},
		{"routed bytes", s.RoutedBytes, 372848459776},
		{"expert sizes", int64(len(s.Experts.Sizes)), 2},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %d, want %d", ck.what, ck.got, ck.want)
		}
	}
	want := []ExpertSize{{Bytes: 18915328, Count: 19200, Formats: "int4-row"}, {Bytes: 37789696, Count: 256, Formats: "int8-row"}}
	if len(s.Experts.Sizes) == 2 && (s.Experts.Sizes[0] != want[0] || s.Experts.Sizes[1] != want[1]) {
		t.Errorf("expert sizes %+v, want %+v", s.Experts.Sizes, want)
	}
	if !s.MTP || s.DSA {
		t.Errorf("MTP %v DSA %v, want MTP present and DSA absent", s.MTP, s.DSA)
	}
}
