package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

func TestLoadFixtures(t *testing.T) {
	for _, tc := range []struct {
		model     string
		layers    int
		sparse    []int
		full      []int
		eos       []int
		genTopP   float64
		hasDoSamp bool
	}{
		{"glm52-tiny", 4, []int{1, 2, 3}, []int{0, 2}, []int{8169, 8176, 8178}, 0.95, true},
		{"glm52-mini", 6, []int{1, 2, 3, 4, 5}, []int{0, 1, 4}, []int{8169, 8176, 8178}, 0.95, true},
	} {
		t.Run(tc.model, func(t *testing.T) {
			c, err := Load(fixtures.Path(t, tc.model))
			if err != nil {
				t.Fatal(err)
			}
			if c.NumLayers != tc.layers {
				t.Errorf("layers %d, want %d", c.NumLayers, tc.layers)
			}
			if got := c.SparseLayers(); !slices.Equal(got, tc.sparse) {
				t.Errorf("sparse layers %v, want %v", got, tc.sparse)
			}
			if got := c.FullIndexerLayers(); !slices.Equal(got, tc.full) {
				t.Errorf("full indexer layers %v, want %v", got, tc.full)
			}
			if !slices.Equal(c.EOSTokenIDs, tc.eos) {
				t.Errorf("eos %v, want %v", c.EOSTokenIDs, tc.eos)
			}
			if c.Generation.TopP != tc.genTopP || c.Generation.DoSample != tc.hasDoSamp {
				t.Errorf("generation defaults %+v", c.Generation)
			}
		})
	}
}

func TestRealConfig(t *testing.T) {
	c, err := Load(fixtures.Path(t, "glm52-real"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 8e6 || c.QKHeadDim() != 256 || c.AttentionScale() != 1.0/16 {
		t.Errorf("rope %g, qk head %d, scale %g", c.RopeTheta, c.QKHeadDim(), c.AttentionScale())
	}
	if n := len(c.SparseLayers()); n != 75 {
		t.Errorf("%d sparse layers, want 75", n)
	}
	full := c.FullIndexerLayers()
	if len(full) != 21 || full[0] != 0 || full[1] != 1 || full[2] != 2 || full[3] != 6 || full[20] != 74 {
		t.Errorf("full indexer layers %v", full)
	}
	if !slices.Contains(c.EOSTokenIDs, 154827) || slices.Contains(c.EOSTokenIDs, 154822) {
		t.Error("eos set wrong")
	}
}

// The GLM-5.2 schedule derived from index_topk_freq/offset must equal its
// explicit indexer_types list.
func TestDerivedScheduleMatchesExplicit(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures.Path(t, "glm52-real"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := Parse(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "indexer_types")
	raw2, _ := json.Marshal(m)
	derived, err := Parse(raw2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(explicit.IndexerTypes, derived.IndexerTypes) {
		t.Errorf("derived schedule %v differs from explicit %v", derived.IndexerTypes, explicit.IndexerTypes)
	}
}

func TestRefusals(t *testing.T) {
	base := func(t *testing.T) map[string]any {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(fixtures.Path(t, "glm52-tiny"), "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		edit   func(m map[string]any)
		substr string
	}{
		{"no hidden size", func(m map[string]any) { delete(m, "hidden_size") }, "hidden_size"},
		{"negative layers", func(m map[string]any) { m["num_hidden_layers"] = -1 }, "num_hidden_layers"},
		{"top-k above experts", func(m map[string]any) { m["num_experts_per_tok"] = 99 }, "num_experts_per_tok"},
		{"kv heads", func(m map[string]any) { m["num_key_value_heads"] = 2 }, "num_key_value_heads"},
		{"group routing", func(m map[string]any) { m["n_group"] = 4 }, "n_group"},
		{"topk_group above n_group", func(m map[string]any) { m["topk_group"] = 2 }, "topk_group"},
		{"topk_group zero", func(m map[string]any) { m["topk_group"] = 0 }, "topk_group"},
		{"index_topk zero", func(m map[string]any) { m["index_topk"] = 0 }, "index_topk"},
		{"index_topk past the positions", func(m map[string]any) { m["index_topk"] = 1 << 30 }, "index_topk"},
		{"odd rope", func(m map[string]any) { m["qk_rope_head_dim"] = 7 }, "qk_rope_head_dim"},
		{"yarn", func(m map[string]any) { m["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e4} }, "rope_type"},
		{"activation", func(m map[string]any) { m["hidden_act"] = "gelu" }, "hidden_act"},
		{"wrong schedule length", func(m map[string]any) { m["indexer_types"] = []string{"full"} }, "indexer_types"},
		{"shared first", func(m map[string]any) { m["indexer_types"] = []string{"shared", "full", "full", "full"} }, "layer 0"},
		{"bad eos", func(m map[string]any) { m["eos_token_id"] = "x" }, "eos_token_id"},
		{"eos outside vocab", func(m map[string]any) { m["eos_token_id"] = 1 << 20 }, "outside the vocabulary"},
		{"model type", func(m map[string]any) { m["model_type"] = "llama" }, "model_type"},
		{"no q lora", func(m map[string]any) { delete(m, "q_lora_rank") }, "q_lora_rank"},
		{"mlp types", func(m map[string]any) { m["mlp_layer_types"] = []string{"dense", "moe", "sparse", "sparse"} }, "mlp_layer_types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base(t)
			tc.edit(m)
			raw, _ := json.Marshal(m)
			_, err := Parse(raw, nil)
			if err == nil || !strings.Contains(err.Error(), tc.substr) {
				t.Fatalf("error %v, want one naming %q", err, tc.substr)
			}
		})
	}
	if _, err := Parse([]byte("{"), nil); err == nil {
		t.Error("truncated JSON accepted")
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("directory without config.json accepted")
	}
}

func TestIndexerPattern(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures.Path(t, "glm52-tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	delete(m, "indexer_types")
	m["index_topk_pattern"] = "FSSF"
	raw, _ = json.Marshal(m)
	c, err := Parse(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexerType{IndexerFull, IndexerShared, IndexerShared, IndexerFull}
	if !slices.Equal(c.IndexerTypes, want) {
		t.Errorf("schedule %v, want %v", c.IndexerTypes, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"glm52-tiny", "glm52-mini", "glm52-real"} {
		if raw, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "fixtures", name, "config.json")); err == nil {
			f.Add(raw, []byte(`{"eos_token_id": [1, 2]}`))
		}
	}
	f.Add([]byte(`{"num_hidden_layers": 100000000}`), []byte(nil))
	f.Fuzz(func(t *testing.T, cfg, gen []byte) {
		c, err := Parse(cfg, gen)
		if err != nil {
			return
		}
		if len(c.SparseLayer) != c.NumLayers || len(c.IndexerTypes) != c.NumLayers {
			t.Fatalf("schedules of %d/%d entries for %d layers", len(c.SparseLayer), len(c.IndexerTypes), c.NumLayers)
		}
	})
}

// TestEncodeRoundTrip requires Encode to write a config.json that Parse
// reads back to the same Config, for both schedule shapes.
func TestEncodeRoundTrip(t *testing.T) {
	for _, model := range []string{"glm52-tiny", "glm52-mini", "glm52-real"} {
		t.Run(model, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(fixtures.Path(t, model), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Parse(raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, schedule := range []string{"as loaded", "interleaved MLP"} {
				if schedule == "interleaved MLP" && want.NumLayers > 2 {
					want.SparseLayer[2] = false // no longer first-k-dense
				}
				enc, err := want.Encode()
				if err != nil {
					t.Fatal(err)
				}
				got, err := Parse(enc, nil)
				if err != nil {
					t.Fatalf("%s: parsing the encoded config: %v\n%s", schedule, err, enc)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: round trip differs:\n got %+v\nwant %+v", schedule, got, want)
				}
			}
		})
	}
}

// TestEncodeWritesEveryField keeps the writer's schema the reader's: every
// config.json field Parse reads is one Encode writes, but for the
// alternatives Encode expresses another way (explicit indexer_types
// instead of a pattern or its derivation, no rope_scaling).
func TestEncodeWritesEveryField(t *testing.T) {
	tags := func(v any) map[string]bool {
		out := map[string]bool{}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			out[name] = true
		}
		return out
	}
	written := tags(encodedConfig{})
	for name := range tags(rawConfig{}) {
		switch name {
		case "rope_scaling", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset":
			continue
		}
		if !written[name] {
			t.Errorf("Parse reads %q but Encode does not write it", name)
		}
	}
}
