package container

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestValidateFixtures(t *testing.T) {
	tests := []struct {
		model       string
		tensors     int
		quantFormat string // routed/attention int4 format
		experts     int
		split       []ExpertRef
		sizes       []ExpertSize
	}{
		{
			model:       "glm52-tiny",
			tensors:     518,
			quantFormat: "int4-row",
			experts:     3*16 + 16,
			split:       []ExpertRef{{Layer: 1, Expert: 5}},
			// int4 per row: (32*32 + 32*32 + 64*16) bytes + (32+32+64)*4 scales;
			// MTP int8: (32*64*2 + 64*32) + 128*4.
			sizes: []ExpertSize{{Bytes: 3584, Count: 48, Formats: "int4-row"}, {Bytes: 6656, Count: 16, Formats: "int8-row"}},
		},
		{
			model:       "glm52-mini",
			tensors:     2490,
			quantFormat: "int4-grouped/64",
			experts:     5*64 + 64,
			split:       []ExpertRef{{Layer: 2, Expert: 17}},
			// int4 g64: 3*128*128 bytes + (128*4 + 128*4 + 256*2)*4 scales;
			// MTP int8: 3*128*256 + (128+128+256)*4.
			sizes: []ExpertSize{{Bytes: 55296, Count: 320, Formats: "int4-grouped/64"}, {Bytes: 100352, Count: 64, Formats: "int8-row"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			c, cfg := openFixture(t, tt.model)
			s, err := Validate(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if s.Tensors != tt.tensors || len(s.Shards) != 4 {
				t.Errorf("tensors %d in %d shards, want %d in 4", s.Tensors, len(s.Shards), tt.tensors)
			}
			if !s.MTP || !s.DSA {
				t.Errorf("MTP %v DSA %v, want both present", s.MTP, s.DSA)
			}
			if s.Experts.Count != tt.experts || s.Experts.Coalesced != tt.experts-1 {
				t.Errorf("experts %d (%d coalesced), want %d (%d)", s.Experts.Count, s.Experts.Coalesced, tt.experts, tt.experts-1)
			}
			if !reflect.DeepEqual(s.Experts.Split, tt.split) {
				t.Errorf("split experts %v, want %v", s.Experts.Split, tt.split)
			}
			if !reflect.DeepEqual(s.Experts.Sizes, tt.sizes) {
				t.Errorf("expert sizes %+v, want %+v", s.Experts.Sizes, tt.sizes)
			}
			if len(s.Unexpected) != 0 {
				t.Errorf("unexpected tensors %v", s.Unexpected)
			}
			var all int64
			for _, n := range c.Names() {
				ti, _ := c.Tensor(n)
				all += ti.Size
			}
			if s.ResidentBytes+s.RoutedBytes != all {
				t.Errorf("resident %d + routed %d = %d, want every tensor byte (%d)", s.ResidentBytes, s.RoutedBytes, s.ResidentBytes+s.RoutedBytes, all)
			}
			var routed int64
			for _, sz := range s.Experts.Sizes {
				routed += sz.Bytes * int64(sz.Count)
			}
			if routed != s.RoutedBytes {
				t.Errorf("routed bytes %d, expert sizes add up to %d", s.RoutedBytes, routed)
			}
			found := map[string]FormatStat{}
			var counted int64
			for _, f := range s.Formats {
				found[f.Format] = f
				counted += f.Bytes
			}
			for _, f := range []string{"vector", "f32", "int8-row", tt.quantFormat} {
				if found[f].Count == 0 {
					t.Errorf("no %s tensors counted in %+v", f, s.Formats)
				}
			}
			if counted != all {
				t.Errorf("format bytes add up to %d, want %d", counted, all)
			}
		})
	}
}

func TestValidateCapabilities(t *testing.T) {
	tests := []struct {
		name     string
		muts     map[string]mutation
		mtp, dsa bool
		experts  int
	}{
		{"no MTP shard", map[string]mutation{"out-mtp-00000.safetensors": nil}, false, true, 48},
		{"no indexer shard", map[string]mutation{"out-idx-00000.safetensors": nil}, true, false, 64},
		{"neither", map[string]mutation{"out-mtp-00000.safetensors": nil, "out-idx-00000.safetensors": nil}, false, false, 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cfg := openDir(t, copyModel(t, "glm52-tiny", tt.muts))
			s, err := Validate(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if s.MTP != tt.mtp || s.DSA != tt.dsa || s.Experts.Count != tt.experts {
				t.Errorf("MTP %v DSA %v experts %d, want %v %v %d", s.MTP, s.DSA, s.Experts.Count, tt.mtp, tt.dsa, tt.experts)
			}
		})
	}
}

func TestValidateRefusals(t *testing.T) {
	const (
		main0 = "out-00000.safetensors"
		main1 = "out-00001.safetensors"
		idx   = "out-idx-00000.safetensors"
		mtp   = "out-mtp-00000.safetensors"
	)
	qb := "model.layers.0.self_attn.q_b_proj.weight" // int4 per row [96, 48] in glm52-tiny
	tests := []struct {
		name  string
		muts  map[string]mutation
		wants []string // substrings of the error
	}{
		{
			name:  "quantized tensor matching no format",
			muts:  map[string]mutation{main0: resize(qb, 96*24+1)},
			wants: []string{qb, "2305 bytes match no format for [96, 48]", "int8-row wants 4608", "int4 wants 2304"},
		},
		{
			name:  "wrong scale count",
			muts:  map[string]mutation{main0: resize(qb+".qs", 95)},
			wants: []string{qb + ".qs", "found 95 (380 bytes)"},
		},
		{
			name:  "missing scales",
			muts:  map[string]mutation{main0: drop(qb + ".qs")},
			wants: []string{qb, "without its " + qb + ".qs"},
		},
		{
			name:  "missing tensor",
			muts:  map[string]mutation{main1: drop("model.layers.3.self_attn.o_proj.weight", "model.layers.3.self_attn.o_proj.weight.qs")},
			wants: []string{`"model.layers.3.self_attn.o_proj.weight" is missing`},
		},
		{
			name:  "missing routed expert",
			muts:  map[string]mutation{main1: drop("model.layers.2.mlp.experts.7.up_proj.weight")},
			wants: []string{`"model.layers.2.mlp.experts.7.up_proj.weight" is missing`},
		},
		{
			name:  "wrong norm length",
			muts:  map[string]mutation{main0: resize("model.norm.weight", 63)},
			wants: []string{"model.norm.weight", "63 elements (252 bytes), want 64 elements (256 bytes)"},
		},
		{
			name:  "partial MTP",
			muts:  map[string]mutation{mtp: drop("model.layers.4.hnorm.weight")},
			wants: []string{"MTP layer 4 is incomplete", "model.layers.4.hnorm.weight"},
		},
		{
			name:  "partial DSA",
			muts:  map[string]mutation{idx: drop("model.layers.2.self_attn.indexer.wq_b.weight", "model.layers.2.self_attn.indexer.wq_b.weight.qs", "model.layers.2.self_attn.indexer.wk.weight", "model.layers.2.self_attn.indexer.wk.weight.qs", "model.layers.2.self_attn.indexer.weights_proj.weight", "model.layers.2.self_attn.indexer.weights_proj.weight.qs", "model.layers.2.self_attn.indexer.k_norm.weight", "model.layers.2.self_attn.indexer.k_norm.bias")},
			wants: []string{"DSA indexer present on full layers [0] but missing on full layers [2]"},
		},
		{
			name:  "incomplete indexer",
			muts:  map[string]mutation{idx: drop("model.layers.0.self_attn.indexer.k_norm.bias")},
			wants: []string{"layer 0: DSA indexer is incomplete", "k_norm.bias"},
		},
		{
			name:  "quantized router",
			muts:  map[string]mutation{main0: quantizeRouter("model.layers.1.mlp.gate.weight", 16, 64)},
			wants: []string{"model.layers.1.mlp.gate.weight", "stored as int8-row, want an unquantized"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cfg := openDir(t, copyModel(t, "glm52-tiny", tt.muts))
			s, err := Validate(c, cfg)
			if err == nil {
				t.Fatalf("validated (%+v), want an error", s)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T, want *ValidationError", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// quantizeRouter replaces a float [rows, cols] router by int8-row bytes and
// scales.
func quantizeRouter(name string, rows, cols int) mutation {
	return func(ts []Tensor) []Tensor {
		out := drop(name)(ts)
		return append(out,
			Tensor{TensorSpec{name, "U8", []int64{int64(rows * cols)}}, make([]byte, rows*cols)},
			Tensor{TensorSpec{name + ".qs", "F32", []int64{int64(rows)}}, make([]byte, 4*rows)},
		)
	}
}

func TestValidateUnexpected(t *testing.T) {
	extra := func(ts []Tensor) []Tensor {
		return append(ts, Tensor{TensorSpec{"model.layers.4.shared_head.head.weight", "F32", []int64{2}}, f32Bytes(1, 2)})
	}
	c, cfg := openDir(t, copyModel(t, "glm52-tiny", map[string]mutation{"out-mtp-00000.safetensors": extra}))
	s, err := Validate(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Unexpected, []string{"model.layers.4.shared_head.head.weight"}) || s.UnexpectedBytes != 8 {
		t.Errorf("unexpected %v (%d bytes), want the one extra tensor (8 bytes)", s.Unexpected, s.UnexpectedBytes)
	}
}

func TestValidationErrorListsAtMost20(t *testing.T) {
	e := &ValidationError{Dir: "d"}
	for range 25 {
		e.Problems = append(e.Problems, "p")
	}
	msg := e.Error()
	if got := strings.Count(msg, "\n  p"); got != maxListed || !strings.Contains(msg, "and 5 more") {
		t.Errorf("message lists %d problems: %q", got, msg)
	}
}

func TestOpenNoShards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Errorf("Open of a directory without shards: %v", err)
	}
}
