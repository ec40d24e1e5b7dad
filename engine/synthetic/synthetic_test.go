package synthetic

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/tokenizer"
	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// fixtures returns ../shared/fixtures relative to the module root, skipping
// the test when it is absent.
func fixtures(t *testing.T) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

func TestConfigIsGLM52(t *testing.T) {
	want, err := config.Load(filepath.Join(fixtures(t), "glm52-real"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := glm52().Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("generated config differs from glm52-real:\n got %+v\nwant %+v", got, want)
	}
}

func TestGenerateSmall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench")
	res, err := Generate(context.Background(), dir, Options{SparseLayers: 2, Experts: 8, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExpertLayers != 2 || res.ExpertsPerLayer != 8 || res.ExpertBytes != ExpertBytesInt4Row {
		t.Errorf("result %+v", res)
	}
	if want := []string{"out-00000.safetensors", "out-00001.safetensors", "out-00002.safetensors", "tokenizer.json", "config.json"}; !reflect.DeepEqual(res.Files, want) {
		t.Errorf("files %v, want %v", res.Files, want)
	}
	c, cfg, sum := testmodel.OpenValidated(t, dir)
	if cfg.HiddenSize != 6144 || cfg.MoEIntermediateSize != 2048 || cfg.NumLayers != 3 || cfg.NumRoutedExperts != 8 {
		t.Errorf("config %+v", cfg)
	}
	checkTokenizer(t, dir, cfg)
	if sum.Experts.Count != 16 || sum.Experts.Coalesced != 16 || sum.MTP || sum.DSA || len(sum.Unexpected) != 0 {
		t.Errorf("summary %+v", sum)
	}
	if want := []container.ExpertSize{{Bytes: ExpertBytesInt4Row, Count: 16, Formats: "int4-row"}}; !reflect.DeepEqual(sum.Experts.Sizes, want) {
		t.Errorf("expert sizes %+v, want %+v", sum.Experts.Sizes, want)
	}
	var shardBytes int64
	for _, s := range sum.Shards {
		shardBytes += s.Bytes
	}
	if shardBytes != res.Bytes || sum.ResidentBytes+sum.RoutedBytes != res.PayloadBytes {
		t.Errorf("shards %d bytes (result %d), resident+routed %d (payload %d)", shardBytes, res.Bytes, sum.ResidentBytes+sum.RoutedBytes, res.PayloadBytes)
	}
	// Every expert is two reads: the weights, then the scales.
	loc, err := c.Expert(2, 5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Reads() != 2 || !loc.Coalesced {
		t.Errorf("expert 5 of layer 2: %d reads, coalesced %v", loc.Reads(), loc.Coalesced)
	}
	// The resident part stays small next to one layer of real experts.
	if sum.ResidentBytes > 128<<20 {
		t.Errorf("resident %d bytes, want under 128 MiB", sum.ResidentBytes)
	}

	ctx := context.Background()
	d, err := loader.Open(ctx, dir, loader.Options{})
	if err != nil {
		t.Fatalf("loader.Open: %v", err)
	}
	defer d.Close()
	seq := d.Model.NewSequence(64)
	out, err := d.Model.Forward(ctx, []model.Request{{Seq: seq, Tokens: []int{1, 500, 2047, 3}, AllLogits: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := out[0].Logits
	if len(rows) != 4 {
		t.Fatalf("%d logit rows, want 4", len(rows))
	}
	for r, row := range rows {
		var sumSq float64
		for i, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("row %d logit %d = %v", r, i, v)
			}
			sumSq += float64(v) * float64(v)
		}
		if sumSq == 0 {
			t.Errorf("row %d logits are all zero", r)
		}
	}
}

func TestDeterministic(t *testing.T) {
	cfg := modelConfig(&Options{SparseLayers: 1, Experts: 8})
	shards := layout(cfg, int4Row)
	// The dense layer's norms and the first matrices, and one expert.
	ts := append(append([]tensor(nil), shards[0].tensors[:8]...), shards[1].tensors[:6]...)
	write := func(seed uint64) []byte {
		path := filepath.Join(t.TempDir(), "s.safetensors")
		if _, _, err := writeShard(context.Background(), path, ts, map[string]string{"format": "pt"}, seed, holesNone); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := write(1), write(1), write(2)
	if !bytes.Equal(a, b) {
		t.Error("the same seed wrote different bytes")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds wrote the same bytes")
	}
}

func TestSparseFilesSkeleton(t *testing.T) {
	for _, tt := range []struct {
		name      string
		groupSize int
		expert    int64
		format    string
	}{
		{"int4-row", 0, ExpertBytesInt4Row, "int4-row"},
		{"group64", 64, ExpertBytesInt4Group64, "int4-grouped/64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "skeleton")
			// Every payload a hole: the headers are what this test checks
			// (TestSkeletonWritesRouting the seeded routing tensors).
			res, err := Generate(context.Background(), dir, Options{SparseFiles: true, GroupSize: tt.groupSize, allHoles: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.PayloadBytes != 0 || len(res.Files) != 79 { // out-00000, 75 expert shards, out-mtp-00000, tokenizer.json, config.json
				t.Errorf("payload %d bytes, %d files", res.PayloadBytes, len(res.Files))
			}
			c, cfg, sum := testmodel.OpenValidated(t, dir)
			if cfg.NumLayers != 78 || len(cfg.SparseLayers()) != 75 || !sum.MTP || sum.DSA {
				t.Errorf("layers %d, sparse %d, MTP %v, DSA %v", cfg.NumLayers, len(cfg.SparseLayers()), sum.MTP, sum.DSA)
			}
			checkTokenizer(t, dir, cfg)
			want := []container.ExpertSize{
				{Bytes: tt.expert, Count: 19200, Formats: tt.format},
				{Bytes: ExpertBytesMTPInt8, Count: 256, Formats: "int8-row"},
			}
			if !reflect.DeepEqual(sum.Experts.Sizes, want) || sum.Experts.Count != 19456 || sum.Experts.Coalesced != 19456 {
				t.Errorf("experts %+v", sum.Experts)
			}
			if tt.groupSize == 0 {
				if sum.ResidentBytes != 10_877_286_144 || sum.RoutedBytes != 372_848_459_776 {
					t.Errorf("resident %d, routed %d; want the pinned artifact's 10,877,286,144 and 372,848,459,776", sum.ResidentBytes, sum.RoutedBytes)
				}
			}
			// The header scan and the config-derived plan agree.
			fromHeaders, err := plan.FromContainer(c, cfg, sum)
			if err != nil {
				t.Fatal(err)
			}
			format, _ := plan.FormatForGroupSize(tt.groupSize)
			fromConfig, err := plan.FromConfig(cfg, plan.Artifact{Int4: format})
			if err != nil {
				t.Fatal(err)
			}
			if fromHeaders.ResidentBytes != fromConfig.ResidentBytes || fromHeaders.RoutedBytes != fromConfig.RoutedBytes ||
				!reflect.DeepEqual(fromHeaders.Layers, fromConfig.Layers) {
				t.Errorf("headers: resident %d routed %d; config: %d %d", fromHeaders.ResidentBytes, fromHeaders.RoutedBytes, fromConfig.ResidentBytes, fromConfig.RoutedBytes)
			}
			if res.Bytes < sum.ResidentBytes+sum.RoutedBytes {
				t.Errorf("apparent size %d is below the payload %d", res.Bytes, sum.ResidentBytes+sum.RoutedBytes)
			}
			used, ok := diskUsage(t, dir)
			if !ok {
				t.Skip("this system does not report allocated blocks")
			}
			if used > 64<<20 {
				t.Errorf("the skeleton uses %d bytes of disk for %d apparent bytes; want under 64 MiB", used, res.Bytes)
			}
			t.Logf("skeleton: %d files, %d apparent bytes, %d bytes on disk", len(res.Files), res.Bytes, used)
		})
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"group size", Options{GroupSize: 32}, "group size"},
		{"too few experts", Options{Experts: 4}, "experts"},
		{"too many layers", Options{SparseLayers: 300}, "sparse layers"},
		{"negative layers", Options{SparseLayers: -1}, "sparse layers"},
		{"skeleton with layers", Options{SparseFiles: true, SparseLayers: 3}, "sparse-files"},
		{"skeleton with a bench MTP layer", Options{SparseFiles: true, MTP: true}, "MTP layer"},
		{"acceptance above 1", Options{MTP: true, MTPAcceptance: 1.5}, "outside 0..1"},
		{"acceptance without MTP", Options{MTPAcceptance: 0.5}, "without an MTP layer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			_, err := Generate(context.Background(), dir, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("invalid options created %s", dir)
			}
		})
	}
}

func TestRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out-00007.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(context.Background(), dir, Options{SparseLayers: 1, Experts: 8}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("err = %v, want a not-empty refusal", err)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := filepath.Join(t.TempDir(), "m")
	_, err := Generate(ctx, dir, Options{SparseLayers: 1, Experts: 8})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("cancelled run left %s", e.Name())
	}
}

// TestCodesAreSymmetric checks the code maps: every int4 and int8 value
// but the mirrorless one keeps its probability, that one becomes 0, and
// the mean over all inputs is exactly 0.
func TestCodesAreSymmetric(t *testing.T) {
	var sum4, sum8 int
	for n := range 16 {
		v := int(symmetricInt4(uint64(n))&15) - 8
		if n == 0 && v != 0 || n != 0 && v != n-8 {
			t.Errorf("nibble %d maps to value %d", n, v)
		}
		sum4 += v
	}
	for b := range 256 {
		v := int(int8(byte(symmetricInt8(uint64(b)))))
		if b == 0x80 && v != 0 || b != 0x80 && v != int(int8(byte(b))) {
			t.Errorf("byte %#x maps to value %d", b, v)
		}
		sum8 += v
	}
	if sum4 != 0 || sum8 != 0 {
		t.Errorf("code sums %d (int4) and %d (int8), want 0", sum4, sum8)
	}
	// The maps act on every nibble and byte of a word independently.
	if got := symmetricInt4(0x0f0f_00f0_1234_0000); got != 0x8f8f_88f8_1234_8888 {
		t.Errorf("int4 word %#x", got)
	}
	if got := symmetricInt8(0x8080_7f01_8000_0080); got != 0x0000_7f01_0000_0000 {
		t.Errorf("int8 word %#x", got)
	}
}

// checkTokenizer checks that a generated model's tokenizer covers its
// vocabulary exactly and that its end ids are GLM-5.2's end tokens.
func checkTokenizer(t *testing.T, dir string, cfg *config.Config) {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != cfg.VocabSize {
		t.Errorf("tokenizer has %d ids, the config %d", tok.VocabSize(), cfg.VocabSize)
	}
	want := []string{"<|endoftext|>", "<|user|>", "<|observation|>"}
	for i, id := range cfg.EOSTokenIDs {
		if got := tok.Decode([]int{id}, false); got != want[i] {
			t.Errorf("end id %d is %q, want %q", id, got, want[i])
		}
	}
	if got := tok.Decode(tok.Encode("a generated model runs"), false); got != "a generated model runs" {
		t.Errorf("round trip %q", got)
	}
}
