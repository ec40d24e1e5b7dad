package plan

import "testing"

// gpuLine returns the named line of g.
func gpuLine(t *testing.T, g *GPUPlan, name string) int64 {
	t.Helper()
	for _, it := range g.Items {
		if it.Name == name {
			return it.Bytes
		}
	}
	t.Fatalf("no %q line", name)
	return 0
}

// TestGPUDiscrete: on a discrete device the plan lays out the GPU lines
// for its own segment; only the staging is process memory; the device's
// memory bounds the segment, and a device too small for the lines says so.
func TestGPUDiscrete(t *testing.T) {
	cfg := realConfig(t)
	w, err := FromConfig(cfg, Artifact{})
	if err != nil {
		t.Fatal(err)
	}
	h200 := &GPUDevice{Memory: 140 << 30}
	p, err := New(cfg, w, Options{Memory: 128 * gib, Context: 8192, GPU: h200})
	if err != nil {
		t.Fatal(err)
	}
	g := p.GPU
	if g == nil || !g.Fits || g.Unified {
		t.Fatalf("GPU plan %+v", g)
	}
	// Every resident matrix but the embedding, lm_head and the MTP layer's
	// extras (eh_proj, its norms), plus the MTP layer.
	H, V := int64(cfg.HiddenSize), int64(cfg.VocabSize)
	noMTP, _ := FromConfig(cfg, Artifact{WithoutMTP: true})
	dense := noMTP.ResidentBytes - 2*(V*H+4*V) - 4*H - 2*4*H*int64(cfg.NumLayers)
	mtpLayer := layerBytes(cfg, true, int8Row) - 2*4*H
	weights := gpuLine(t, g, ItemGPUWeights)
	if lo := dense + mtpLayer + gpuArenaBytes; weights < lo || weights > lo+1<<20+4*H*int64(cfg.NumLayers+1)*2 {
		t.Errorf("GPU weights %d, want %d plus padding", weights, lo)
	}
	// A segment routes to all 256 experts of a layer: the bank holds two
	// groups of an eighth of them (of the widest, the MTP layer's int8).
	slot := max(w.MainExpertBytes(), w.MTPExpertBytes()) + 6*gpuAlign
	if got, want := gpuLine(t, g, ItemGPUBank), 2*32*slot; got != want || g.BankBytes != got {
		t.Errorf("bank %d (BankBytes %d), want %d", got, g.BankBytes, want)
	}
	work, staging := gpuLine(t, g, ItemGPUWork), gpuLine(t, g, ItemGPUStaging)
	if work < 256<<20 || work > 8<<30 || staging < GPUStageRingBytes || staging > 2<<30 {
		t.Errorf("work %d or staging %d out of range", work, staging)
	}
	// The resident experts take what the other lines leave of 95% of the
	// device, in whole slots.
	resident := gpuLine(t, g, ItemGPUExperts)
	if free := h200.Memory/20*19 - (weights + g.BankBytes + work); resident != g.ResidentExpertBytes || resident%slot != 0 || resident > free || resident < free-(1<<30) {
		t.Errorf("resident experts %d (%d), want whole slots of %d within the %d left", resident, g.ResidentExpertBytes, slot, free)
	}
	if g.DeviceBytes != weights+g.BankBytes+work+resident || g.HostBytes != staging {
		t.Errorf("sums %d/%d disagree with the lines", g.DeviceBytes, g.HostBytes)
	}
	if it, ok := p.Item(ItemGPUStaging); !ok || it.Bytes != staging {
		t.Errorf("the staging line is not in the process plan: %+v", it)
	}
	if _, ok := p.Item(ItemGPUWork); ok {
		t.Error("a discrete device's working buffers are in the process plan")
	}

	// A device that holds the weights and the bank but not the working
	// buffers of a long segment gets a shorter one.
	tight := &GPUDevice{Memory: (weights + g.BankBytes + work*3/4) * 20 / 19}
	pt, err := New(cfg, w, Options{Memory: 128 * gib, Context: 8192, GPU: tight})
	if err != nil {
		t.Fatal(err)
	}
	if !pt.GPU.Fits || pt.PrefillSegment >= p.PrefillSegment || pt.GPU.DeviceBytes > tight.Memory {
		t.Errorf("tight device: segment %d (roomy %d), fits %v, %d of %d bytes", pt.PrefillSegment, p.PrefillSegment, pt.GPU.Fits, pt.GPU.DeviceBytes, tight.Memory)
	}
	small, err := New(cfg, w, Options{Memory: 128 * gib, Context: 8192, GPU: &GPUDevice{Memory: 8 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if small.GPU.Fits || small.GPU.Problem == "" || !small.Fits {
		t.Errorf("an 8 GiB device: GPU fits %v (%q), plan fits %v", small.GPU.Fits, small.GPU.Problem, small.Fits)
	}
	// Attention over a longer context needs more scratch (with segments
	// short enough that attention is the largest operation).
	short, err := New(cfg, w, Options{Memory: 128 * gib, Context: 8192, Segment: PrefillScratchRows, GPU: h200})
	if err != nil {
		t.Fatal(err)
	}
	long, err := New(cfg, w, Options{Memory: 128 * gib, Context: 65536, Segment: PrefillScratchRows, GPU: h200})
	if err != nil {
		t.Fatal(err)
	}
	if gpuLine(t, long.GPU, ItemGPUWork) <= gpuLine(t, short.GPU, ItemGPUWork) {
		t.Errorf("a 64k context does not grow the working buffers")
	}
}

// TestGPUUnified: on unified memory (a Mac) every GPU line is a line of
// the process plan, the bank holds 2 x experts_per_tok experts, weights
// used in place take nothing, and the expert cache gives way to the lines.
func TestGPUUnified(t *testing.T) {
	cfg := realConfig(t)
	w, _ := FromConfig(cfg, Artifact{})
	cpu, err := New(cfg, w, Options{Memory: 32 * gib})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, w, Options{Memory: 32 * gib, GPU: &GPUDevice{Unified: true, InPlace: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Fits || p.GPU == nil || !p.GPU.Unified || p.ExpertCacheBytes >= cpu.ExpertCacheBytes {
		t.Fatalf("fits %v, GPU %+v, cache %d (CPU %d)", p.Fits, p.GPU, p.ExpertCacheBytes, cpu.ExpertCacheBytes)
	}
	for _, name := range []string{ItemGPUWeights, ItemGPUBank, ItemGPUWork, ItemGPUStaging} {
		it, ok := p.Item(name)
		if !ok || it.Bytes != gpuLine(t, p.GPU, name) {
			t.Errorf("%s: in the process plan %v, %d bytes", name, ok, it.Bytes)
		}
	}
	slot := max(w.MainExpertBytes(), w.MTPExpertBytes()) + 6*gpuAlign
	if p.GPU.BankBytes != int64(2*cfg.ExpertsPerToken)*slot || gpuLine(t, p.GPU, ItemGPUWeights) != 0 {
		t.Errorf("bank %d, weights %d", p.GPU.BankBytes, gpuLine(t, p.GPU, ItemGPUWeights))
	}
	// The GPU's memory is not the Go heap.
	if p.GoMemoryLimitBytes > cpu.GoMemoryLimitBytes+(1<<30) {
		t.Errorf("Go memory limit %d with the GPU, %d without", p.GoMemoryLimitBytes, cpu.GoMemoryLimitBytes)
	}
	copied, _ := New(cfg, w, Options{Memory: 32 * gib, GPU: &GPUDevice{Unified: true}})
	if copied.ExpertCacheBytes >= p.ExpertCacheBytes {
		t.Errorf("copied weights do not take from the cache (%d >= %d)", copied.ExpertCacheBytes, p.ExpertCacheBytes)
	}
}

func TestGPUGroupedFormat(t *testing.T) {
	cfg := realConfig(t)
	row, _ := FromConfig(cfg, Artifact{})
	g64, _ := FromConfig(cfg, Artifact{Int4: Group64Int4})
	dev := &GPUDevice{}
	if a, b := gpuWeights(cfg, row, dev), gpuWeights(cfg, g64, dev); b.Bytes <= a.Bytes {
		t.Errorf("grouped weights %d not above per-row %d", b.Bytes, a.Bytes)
	}
}
