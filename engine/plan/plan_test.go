package plan

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

const gib = 1 << 30

// fixtures returns ../shared/fixtures relative to the module root, skipping
// the test when it is absent.
func fixtures(t *testing.T) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

func realConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(fixtures(t), "glm52-real"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestFromConfigReal(t *testing.T) {
	cfg := realConfig(t)
	tests := []struct {
		name                  string
		a                     Artifact
		resident, routed      int64
		mainExpert, mtpExpert int64
		layers                int
	}{
		// The pinned artifact (glm52-real/README.md).
		{"pinned", Artifact{}, 10_877_286_144, 19_200*18_915_328 + 256*37_789_696, 18_915_328, 37_789_696, 76},
		{"group64", Artifact{Int4: Group64Int4}, -1, 19_200*21_233_664 + 256*37_789_696, 21_233_664, 37_789_696, 76},
		// The indexer overlay: 21 full layers x 9,389,696 bytes of tensors
		// (its 20 files hold 197,202,400 bytes with their headers).
		{"indexer", Artifact{WithIndexer: true}, 10_877_286_144 + 21*9_389_696, -1, 18_915_328, 37_789_696, 76},
		{"no MTP", Artifact{WithoutMTP: true}, 10_877_286_144 - 284_972_288, 19_200 * 18_915_328, 18_915_328, 0, 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := FromConfig(cfg, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if tt.resident >= 0 && w.ResidentBytes != tt.resident {
				t.Errorf("resident = %d, want %d", w.ResidentBytes, tt.resident)
			}
			if tt.routed >= 0 && w.RoutedBytes != tt.routed {
				t.Errorf("routed = %d, want %d", w.RoutedBytes, tt.routed)
			}
			if got := w.MainExpertBytes(); got != tt.mainExpert {
				t.Errorf("main expert = %d, want %d", got, tt.mainExpert)
			}
			if got := w.MTPExpertBytes(); got != tt.mtpExpert {
				t.Errorf("MTP expert = %d, want %d", got, tt.mtpExpert)
			}
			if len(w.Layers) != tt.layers {
				t.Errorf("%d expert layers, want %d", len(w.Layers), tt.layers)
			}
		})
	}
	w, _ := FromConfig(cfg, Artifact{Int4: Group64Int4})
	if pinned, _ := FromConfig(cfg, Artifact{}); w.ResidentBytes <= pinned.ResidentBytes {
		t.Errorf("group-64 resident %d is not above per-row %d", w.ResidentBytes, pinned.ResidentBytes)
	}
}

func TestFormatForGroupSize(t *testing.T) {
	for _, tt := range []struct {
		gs   int
		want Format
		ok   bool
	}{{0, PerRowInt4, true}, {64, Group64Int4, true}, {32, 0, false}, {-1, 0, false}} {
		f, err := FormatForGroupSize(tt.gs)
		if (err == nil) != tt.ok || (tt.ok && f != tt.want) {
			t.Errorf("FormatForGroupSize(%d) = %v, %v", tt.gs, f, err)
		}
	}
}

func TestSlotBytes(t *testing.T) {
	for _, tt := range []struct{ in, want int64 }{
		{0, 0},
		{1, 2 * SlotAlign},
		{SlotAlign, 2 * SlotAlign},
		{18_915_328, 1155*SlotAlign + SlotAlign},
		{37_789_696, 2307*SlotAlign + SlotAlign},
	} {
		if got := SlotBytes(tt.in); got != tt.want {
			t.Errorf("SlotBytes(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func realPlan(t *testing.T, opts Options) *Plan {
	t.Helper()
	cfg := realConfig(t)
	w, err := FromConfig(cfg, Artifact{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, w, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRealFits32GiB(t *testing.T) {
	p := realPlan(t, Options{Memory: 32 * gib})
	if !p.Fits || p.Err() != nil {
		t.Fatalf("does not fit in 32 GiB: %v", p.Err())
	}
	// The embedding table (154,880 rows of 6,144 int8 weights and a
	// scale) is read by row on demand into a cache of 2,048 rows.
	if p.ResidentWeightBytes != 10_877_286_144-154_880*6_148 || p.EmbeddingRows != EmbeddingCacheRows {
		t.Errorf("resident = %d, embedding rows %d", p.ResidentWeightBytes, p.EmbeddingRows)
	}
	if it, ok := p.Item(ItemEmbedding); !ok || it.Bytes != 2048*(6148+EmbeddingSlotOverhead)+4*154_880 {
		t.Errorf("embedding line %+v", it)
	}
	if p.MemoryLimitBytes != 28*gib || p.OSReserveBytes != 4*gib {
		t.Errorf("limit %d, OS reserve %d; want 28 GiB and 4 GiB", p.MemoryLimitBytes, p.OSReserveBytes)
	}
	if p.ExpertSlotBytes != SlotBytes(18_915_328) || p.WorkingSlots != 16 || p.MTPSlots != 8 {
		t.Errorf("slot %d, working %d, MTP %d", p.ExpertSlotBytes, p.WorkingSlots, p.MTPSlots)
	}
	// 79 layers (78 + MTP) x (512 + 64) floats x 4 bytes per token.
	if p.KVBytesPerToken != 79*576*4 || p.KVBytes != 4096*79*576*4 {
		t.Errorf("KV %d per token, %d total", p.KVBytesPerToken, p.KVBytes)
	}
	var sum int64
	for _, it := range p.Items {
		if it.Bytes < 0 || it.Detail == "" {
			t.Errorf("item %+v", it)
		}
		sum += it.Bytes
	}
	if sum != p.PlannedProcessBytes || sum > p.MemoryLimitBytes {
		t.Errorf("items sum to %d, planned %d, limit %d", sum, p.PlannedProcessBytes, p.MemoryLimitBytes)
	}
	if p.CacheSlotsPerLayer < 1 || p.ExpertCacheBytes != int64(p.CacheSlotsPerLayer)*p.SlotSetBytes {
		t.Errorf("cache %d slots, %d bytes", p.CacheSlotsPerLayer, p.ExpertCacheBytes)
	}
	// One more slot set must not fit: the cache takes what remains.
	if p.PlannedProcessBytes+p.SlotSetBytes <= p.MemoryLimitBytes {
		t.Errorf("cache leaves room for another slot set: planned %d + %d <= %d", p.PlannedProcessBytes, p.SlotSetBytes, p.MemoryLimitBytes)
	}
	if want := int64(75)*SlotBytes(18_915_328) + SlotBytes(37_789_696); p.SlotSetBytes != want {
		t.Errorf("slot set %d, want %d", p.SlotSetBytes, want)
	}
	tab := p.Table()
	for _, s := range []string{ItemResident, "9,925,083,904", ItemEmbedding, ItemCache, "fits: yes"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestRealRefused14GiB(t *testing.T) {
	p := realPlan(t, Options{Memory: 14 * gib})
	if p.Fits {
		t.Fatalf("fits in 14 GiB:\n%s", p.Table())
	}
	var fe *FitError
	if err := p.Err(); !errors.As(err, &fe) {
		t.Fatalf("Err() = %v, want *FitError", err)
	}
	msg := p.Err().Error()
	for _, s := range []string{ItemResident, ItemWorking, ItemKV, ItemSegment, ItemScratch, ItemLogits, ItemWorkers, ItemAttention, ItemDecoders, ItemRuntime, ItemCache, "needs at least", "not even one expert cache slot"} {
		if !strings.Contains(msg, s) {
			t.Errorf("refusal lacks %q:\n%s", s, msg)
		}
	}
	// The suggested memory must fit.
	var memGiB int64
	if _, err := fmtSscan(p.Suggestion, &memGiB); err != nil {
		t.Fatalf("suggestion %q: %v", p.Suggestion, err)
	}
	if q := realPlan(t, Options{Memory: memGiB * gib}); !q.Fits {
		t.Errorf("suggested %d GiB does not fit:\n%s", memGiB, q.Table())
	}
	if q := realPlan(t, Options{Memory: (memGiB - 1) * gib}); q.Fits {
		t.Errorf("suggested %d GiB but %d GiB fits", memGiB, memGiB-1)
	}
}

// TestReserveTakesTheBudget: a budget no larger than the OS reserve is
// refused saying that nothing is left, never with a limit of 0 or less.
func TestReserveTakesTheBudget(t *testing.T) {
	for _, mem := range []int64{1 * gib, DefaultOSReserve(2 * gib)} {
		p := realPlan(t, Options{Memory: mem})
		if p.Fits || p.MemoryLimitBytes > 0 {
			t.Fatalf("%d bytes: fits %v, limit %d", mem, p.Fits, p.MemoryLimitBytes)
		}
		if !strings.Contains(p.Problem, "nothing is left: the OS reserve of") || strings.Contains(p.Problem, "the limit is") {
			t.Errorf("%d bytes: %s", mem, p.Problem)
		}
	}
}

func TestContextSuggestion(t *testing.T) {
	// 8 sequences of 64k tokens need ~95 GB of KV; a shorter context fits.
	p := realPlan(t, Options{Memory: 64 * gib, Context: 65536, Sequences: 8})
	if p.Fits {
		t.Fatalf("fits:\n%s", p.Table())
	}
	i := strings.Index(p.Suggestion, "reduce --context to ")
	if i < 0 {
		t.Fatalf("no context suggestion: %q", p.Suggestion)
	}
	var ctx int
	if _, err := fmtSscan(p.Suggestion[i+len("reduce --context to "):], &ctx); err != nil {
		t.Fatal(err)
	}
	if q := realPlan(t, Options{Memory: 64 * gib, Context: ctx, Sequences: 8}); !q.Fits {
		t.Errorf("suggested context %d does not fit:\n%s", ctx, q.Table())
	}
	if q := realPlan(t, Options{Memory: 64 * gib, Context: ctx + 256, Sequences: 8}); q.Fits {
		t.Errorf("suggested context %d but %d fits", ctx, ctx+256)
	}
	if !strings.Contains(p.Suggestion, "one sequence at a time") {
		t.Errorf("no sequences suggestion: %q", p.Suggestion)
	}
}

func TestExpertCacheOption(t *testing.T) {
	auto := realPlan(t, Options{Memory: 32 * gib})
	tests := []struct {
		name  string
		cache int64
		fits  bool
		slots int
	}{
		{"two rows", 2*auto.SlotSetBytes + 5, true, 2},
		{"below one row", auto.SlotSetBytes - 1, false, 0},
		{"too large", 40 * gib, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := realPlan(t, Options{Memory: 32 * gib, ExpertCache: tt.cache})
			if p.Fits != tt.fits {
				t.Fatalf("fits = %v:\n%s", p.Fits, p.Table())
			}
			if tt.slots >= 0 && p.CacheSlotsPerLayer != tt.slots {
				t.Errorf("%d slots, want %d", p.CacheSlotsPerLayer, tt.slots)
			}
			if !p.Fits && p.Suggestion == "" {
				t.Error("no suggestion")
			}
		})
	}
}

func TestMachineMemory(t *testing.T) {
	cfg := realConfig(t)
	w, _ := FromConfig(cfg, Artifact{})
	p, err := New(cfg, w, Options{MachineMemory: func() (int64, error) { return 48 * gib, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if p.MemoryBytes != 48*gib || p.OSReserveBytes != 6*gib {
		t.Errorf("memory %d, OS reserve %d", p.MemoryBytes, p.OSReserveBytes)
	}
	if _, err := New(cfg, w, Options{}); err == nil {
		t.Error("no memory and no MachineMemory: no error")
	}
	if _, err := New(cfg, w, Options{MachineMemory: func() (int64, error) { return 0, errors.New("no sysctl") }}); err == nil || !strings.Contains(err.Error(), "no sysctl") {
		t.Errorf("MachineMemory failure: %v", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	cfg := realConfig(t)
	w, _ := FromConfig(cfg, Artifact{})
	for _, o := range []Options{
		{Memory: -1},
		{Memory: 32 * gib, Context: -5},
		{Memory: 32 * gib, Context: 1 << 23},
		{Memory: 32 * gib, Sequences: 5000},
		{Memory: 4 * gib, OSReserve: 4 * gib},
		{Memory: 32 * gib, ExpertCache: -1},
	} {
		if _, err := New(cfg, w, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(nil, w, Options{Memory: gib}); err == nil {
		t.Error("nil config accepted")
	}
}

// TestFixtureContainers plans the fixture models from their headers and
// checks the header scan against the config-derived figures of the same
// format set.
func TestFixtureContainers(t *testing.T) {
	fx := fixtures(t)
	for _, tt := range []struct {
		name string
		a    Artifact
	}{
		{"glm52-tiny", Artifact{WithIndexer: true}},
		{"glm52-mini", Artifact{Int4: Group64Int4, WithIndexer: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, cfg, sum := testmodel.OpenValidated(t, filepath.Join(fx, tt.name))
			w, err := FromContainer(c, cfg, sum)
			if err != nil {
				t.Fatal(err)
			}
			if w.ResidentBytes != sum.ResidentBytes || w.RoutedBytes != sum.RoutedBytes || !w.MTP || !w.DSA {
				t.Errorf("weights %+v disagree with summary %d/%d", w, sum.ResidentBytes, sum.RoutedBytes)
			}
			want, err := FromConfig(cfg, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if want.ResidentBytes != w.ResidentBytes || want.RoutedBytes != w.RoutedBytes {
				t.Errorf("config-derived resident %d routed %d, headers %d %d", want.ResidentBytes, want.RoutedBytes, w.ResidentBytes, w.RoutedBytes)
			}
			if len(want.Layers) != len(w.Layers) {
				t.Fatalf("%d layers from the config, %d from the headers", len(want.Layers), len(w.Layers))
			}
			for i := range w.Layers {
				if want.Layers[i] != w.Layers[i] {
					t.Errorf("layer %d: config %+v, headers %+v", i, want.Layers[i], w.Layers[i])
				}
			}
			p, err := New(cfg, w, Options{Memory: 8 * gib, Context: 256})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Fits || p.CacheSlotsPerLayer != cfg.NumRoutedExperts {
				t.Errorf("fits %v with %d slots (want all %d):\n%s", p.Fits, p.CacheSlotsPerLayer, cfg.NumRoutedExperts, p.Table())
			}
			if p.KVBytesPerToken == 0 {
				t.Error("no KV bytes per token")
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"32GiB", 32 << 30, true},
		{"32gib", 32 << 30, true},
		{"24GB", 24_000_000_000, true},
		{"512MiB", 512 << 20, true},
		{"1.5 GiB", 3 << 29, true},
		{"4096", 4096, true},
		{" 16Gi ", 16 << 30, true},
		{"", 0, false},
		{"0", 0, false},
		{"-1GB", 0, false},
		{"lots", 0, false},
		{"32 parsecs", 0, false},
		{"100EiB", 0, false},
	} {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"32GiB", "24GB", "512MiB", "1.5 GiB", "0", "-3", "9999999999999999999999EiB", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n <= 0 {
			t.Errorf("ParseSize(%q) = %d without error", s, n)
		}
	})
}
