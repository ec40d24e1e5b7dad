package plan

import "testing"

func TestGPUReal(t *testing.T) {
	cfg := realConfig(t)
	w, err := FromConfig(cfg, Artifact{})
	if err != nil {
		t.Fatal(err)
	}
	g := GPU(cfg, w, GPUOptions{})
	item := func(name string) int64 {
		for _, it := range g.Items {
			if it.Name == name {
				return it.Bytes
			}
		}
		t.Fatalf("no %q line", name)
		return 0
	}
	// Every resident matrix but the embedding, lm_head and MTP layer.
	H, V := int64(cfg.HiddenSize), int64(cfg.VocabSize)
	mtp := w.ResidentBytes - func() int64 { n, _ := FromConfig(cfg, Artifact{WithoutMTP: true}); return n.ResidentBytes }()
	dense := w.ResidentBytes - mtp - 2*(V*H+4*V) - 4*H
	if got := item(ItemGPUWeights); got < dense+gpuArenaBytes || got > dense+gpuArenaBytes+1<<20 {
		t.Errorf("GPU weights %d, want %d plus an arena and padding", got, dense)
	}
	// 256 experts of 18.9 MB exceed one 4 GiB binding: 227 per batch.
	if got, want := item(ItemGPUBank), int64(227)*(18_915_328+6*256); got != want {
		t.Errorf("bank %d, want %d", got, want)
	}
	if g.BankBytes != item(ItemGPUBank) {
		t.Errorf("BankBytes %d, bank line %d", g.BankBytes, item(ItemGPUBank))
	}
	work, staging := item(ItemGPUWork), item(ItemGPUStaging)
	if work < 256<<20 || work > 2<<30 || staging < GPUStageRingBytes || staging > 1<<30 {
		t.Errorf("work %d or staging %d out of range", work, staging)
	}
	if g.DeviceBytes != item(ItemGPUWeights)+item(ItemGPUBank)+work || g.HostBytes != staging {
		t.Errorf("sums %d/%d disagree with the lines", g.DeviceBytes, g.HostBytes)
	}
	// An H200 holds it; the weights in place drop that line.
	if g.DeviceBytes > 139<<30 {
		t.Errorf("the GPU plan (%s) exceeds an H200", SizeText(g.DeviceBytes))
	}
	if in := GPU(cfg, w, GPUOptions{InPlace: true}); in.Items[0].Bytes != 0 || in.DeviceBytes != g.DeviceBytes-item(ItemGPUWeights) {
		t.Errorf("in place: %+v", in.Items[0])
	}
	// Unified memory banks two experts_per_tok at a time.
	if u := GPU(cfg, w, GPUOptions{Unified: true, InPlace: true}); u.BankBytes != 16*(18_915_328+6*256) {
		t.Errorf("unified bank %d", u.BankBytes)
	}
	// Extra lines are fixed items of the process plan.
	p, err := New(cfg, w, Options{Memory: 32 * gib})
	if err != nil {
		t.Fatal(err)
	}
	u := GPU(cfg, w, GPUOptions{Unified: true, InPlace: true})
	pu, err := New(cfg, w, Options{Memory: 32 * gib, Extra: u.Items})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pu.Item(ItemGPUBank); !ok || !pu.Fits || pu.ExpertCacheBytes >= p.ExpertCacheBytes {
		t.Errorf("with the GPU lines: fits %v, cache %d (without %d)", pu.Fits, pu.ExpertCacheBytes, p.ExpertCacheBytes)
	}
	// Attention over a longer context needs more scratch, up to the score cap.
	long := GPU(cfg, w, GPUOptions{Context: 65536})
	if long.Items[2].Bytes <= work {
		t.Errorf("a 64k context does not grow the working buffers (%d <= %d)", long.Items[2].Bytes, work)
	}
}

func TestGPUGroupedFormat(t *testing.T) {
	cfg := realConfig(t)
	row, _ := FromConfig(cfg, Artifact{})
	g64, _ := FromConfig(cfg, Artifact{Int4: Group64Int4})
	a, b := GPU(cfg, row, GPUOptions{}), GPU(cfg, g64, GPUOptions{})
	if b.Items[0].Bytes <= a.Items[0].Bytes {
		t.Errorf("grouped weights %d not above per-row %d", b.Items[0].Bytes, a.Items[0].Bytes)
	}
}
