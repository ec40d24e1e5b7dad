package speed

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// p2 is the P2 bench model (gen-bench --sparse-layers 4 --experts 64) under
// --memory 8GiB --expert-cache 160780288: 2 cache slots per layer.
var p2 = Model{
	DenseBytes: 135_000_000, ExpertLayers: 4, ExpertsPerLayer: 64, ExpertsPerToken: 8,
	ExpertBytes: 18_915_328, CacheSlotsPerLayer: 2, PrefillSegment: 4096,
}

func TestPredictDecode(t *testing.T) {
	eb := 18_915_328.0
	miss := 4 * 8 * (62.0 / 64) * eb // P2's misses a token: 2 of 64 experts cached
	for _, tc := range []struct {
		name      string
		m         Model
		mc        Machine
		wantTok   float64 // expected seconds per token, worked by hand below
		wantBound string
		wantHit   float64
		wantWords []string // in the decode assumption
	}{
		{
			// disk-bound, direct reads: the disk's stream is the misses at
			// the burst rate, each layer's last expert (4 x eb / 4 GB/s)
			// and the dense weights (135 MB / 4 GB/s); the cores' stream,
			// 32 experts and the dense weights at 4 GB/s, is shorter.
			name:    "disk-bound",
			m:       p2,
			mc:      Machine{Name: "vm", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 0.8e9, KernelBytesPerSecond: 4e9, MatMul8BytesPerSecond: 1e9},
			wantTok: miss/0.8e9 + 4*eb/4e9 + 135e6/4e9, wantBound: "disk", wantHit: 2.0 / 64,
			wantWords: []string{"disk-bound", "0.80 GB/s", "4.00 GB/s"},
		},
		{
			// compute-bound: a disk far faster than the kernels: 4 layers x 8 x eb / 1 GB/s
			name:    "compute-bound",
			m:       p2,
			mc:      Machine{Name: "fast disk", DiskBytesPerSecond: 100e9, DiskBurstBytesPerSecond: 100e9, KernelBytesPerSecond: 1e9, MatMul8BytesPerSecond: 1e9},
			wantTok: 135e6/1e9 + 4*8*eb/1e9, wantBound: "compute", wantHit: 2.0 / 64,
			wantWords: []string{"compute-bound"},
		},
		{
			// reads the kernel copies (a memory-backed file system): the
			// disk's stream, miss/10 GB/s + 4 x eb/10 GB/s + 135 MB/10
			// GB/s = 79.7 ms, would bound the token; but the copies take
			// miss x 0.2 ns / 2 threads = 58.6 ms of the cores, whose
			// stream becomes 32 x eb/10 GB/s + 13.5 ms + 58.6 ms = 132.6 ms.
			name:    "reads copied by the CPU",
			m:       p2,
			mc:      Machine{Name: "tmpfs", DiskBytesPerSecond: 10e9, DiskBurstBytesPerSecond: 10e9, ReadCPUSecondsPerByte: 0.2e-9, Cores: 2, KernelBytesPerSecond: 10e9, MatMul8BytesPerSecond: 1e9},
			wantTok: 4*8*eb/10e9 + 135e6/10e9 + miss*0.2e-9/2, wantBound: "compute", wantHit: 2.0 / 64,
			wantWords: []string{"compute-bound", "of CPU time the reads take", "58.6 ms"},
		},
		{
			// everything cached: no reads, the products alone
			name:    "all cached",
			m:       Model{DenseBytes: 0, ExpertLayers: 2, ExpertsPerLayer: 16, ExpertsPerToken: 4, ExpertBytes: 1e6, CacheSlotsPerLayer: 40, PrefillSegment: 64},
			mc:      Machine{Name: "m", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 1e9, KernelBytesPerSecond: 1e9, MatMul8BytesPerSecond: 1e9},
			wantTok: 2 * 4 * 1e6 / 1e9, wantBound: "compute", wantHit: 1,
			wantWords: []string{"compute-bound", " 0 MB of misses"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(tc.m, tc.mc)
			if err != nil {
				t.Fatal(err)
			}
			if got := 1 / p.DecodeTokensPerSecond; math.Abs(got-tc.wantTok) > 1e-9*tc.wantTok {
				t.Errorf("seconds per token %.9g, want %.9g", got, tc.wantTok)
			}
			if p.DecodeBound != tc.wantBound || p.ExpectedHitRate != tc.wantHit {
				t.Errorf("bound %q hit %g, want %q %g", p.DecodeBound, p.ExpectedHitRate, tc.wantBound, tc.wantHit)
			}
			words := strings.Join(p.Assumptions, " ")
			for _, w := range tc.wantWords {
				if !strings.Contains(words, w) {
					t.Errorf("assumptions do not say %q: %q", w, p.Assumptions)
				}
			}
			if copied := strings.Contains(words, "of CPU time the reads take"); copied != (tc.mc.ReadCPUSecondsPerByte > 0) {
				t.Errorf("assumptions name the reads' copies: %v, with %g s/byte", copied, tc.mc.ReadCPUSecondsPerByte)
			}
			if len(p.Assumptions) < 4 {
				t.Errorf("%d assumptions", len(p.Assumptions))
			}
			if !(p.PrefillTokensPerSecond > 0) || p.PrefillTokens != min(PromptTokens, tc.m.PrefillSegment) {
				t.Errorf("prefill %g tok/s over %d tokens", p.PrefillTokensPerSecond, p.PrefillTokens)
			}
		})
	}
}

// TestPredictDecodeMonotone: a faster disk, faster kernels or cheaper
// reads never predict a slower decode.
func TestPredictDecodeMonotone(t *testing.T) {
	base := Machine{Name: "m", DiskBytesPerSecond: 2e9, DiskBurstBytesPerSecond: 1.5e9, ReadCPUSecondsPerByte: 0.1e-9, Cores: 2, KernelBytesPerSecond: 20e9, MatMul8BytesPerSecond: 5e9}
	p0, err := Predict(p2, base)
	if err != nil {
		t.Fatal(err)
	}
	for name, tweak := range map[string]func(*Machine){
		"burst rate":  func(m *Machine) { m.DiskBurstBytesPerSecond *= 4 },
		"kernel rate": func(m *Machine) { m.KernelBytesPerSecond *= 4 },
		"direct I/O":  func(m *Machine) { m.ReadCPUSecondsPerByte = 0 },
		"cores":       func(m *Machine) { m.Cores *= 4 },
	} {
		mc := base
		tweak(&mc)
		p, err := Predict(p2, mc)
		if err != nil || p.DecodeTokensPerSecond < p0.DecodeTokensPerSecond {
			t.Errorf("%s: %g tok/s (%v), below %g", name, p.DecodeTokensPerSecond, err, p0.DecodeTokensPerSecond)
		}
	}
}

func TestPredictPrefill(t *testing.T) {
	// 512 tokens over 64 experts with 8 a token touch all but (56/64)^512
	// of them: every expert is read (62 of 64 miss) and applied to its
	// 64 rows in 8 passes of 8.
	eb := 18_915_328.0
	mc := Machine{Name: "vm", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 0.5e9, KernelBytesPerSecond: 4e9, MatMul8BytesPerSecond: 0.5e9}
	p, err := Predict(p2, mc)
	if err != nil {
		t.Fatal(err)
	}
	touched := 64 * (1 - math.Pow(56.0/64, 512))
	read := 4 * touched * (62.0 / 64) * eb / 1e9
	compute := (135e6*64 + 4*touched*eb*8) / 0.5e9
	if want := 512 / math.Max(read, compute); math.Abs(p.PrefillTokensPerSecond-want) > 1e-9*want {
		t.Errorf("prefill %.9g tok/s, want %.9g", p.PrefillTokensPerSecond, want)
	}
	// On a GPU the products cost 2 flops a weight and token, 2 weights a byte.
	mc.GPUFlops = 10e12
	g, err := Predict(p2, mc)
	if err != nil {
		t.Fatal(err)
	}
	gpu := 2 * 2 * (135e6 + 4*8*eb) * 512 / 10e12
	if want := 512 / math.Max(read, gpu); math.Abs(g.PrefillTokensPerSecond-want) > 1e-9*want {
		t.Errorf("GPU prefill %.9g tok/s, want %.9g", g.PrefillTokensPerSecond, want)
	}
}

func TestPredictRefusesBadInput(t *testing.T) {
	ok := Machine{Name: "m", DiskBytesPerSecond: 1, DiskBurstBytesPerSecond: 1, KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1}
	for name, tc := range map[string]struct {
		m  Model
		mc Machine
	}{
		"dense model":    {Model{DenseBytes: 1, PrefillSegment: 1}, ok},
		"k above E":      {Model{ExpertLayers: 1, ExpertsPerLayer: 4, ExpertsPerToken: 5, ExpertBytes: 1, PrefillSegment: 1}, ok},
		"no segment":     {Model{ExpertLayers: 1, ExpertsPerLayer: 4, ExpertsPerToken: 2, ExpertBytes: 1}, ok},
		"no disk":        {p2, Machine{KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1}},
		"no burst rate":  {p2, Machine{DiskBytesPerSecond: 1, KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1}},
		"NaN kernel":     {p2, Machine{DiskBytesPerSecond: 1, DiskBurstBytesPerSecond: 1, KernelBytesPerSecond: math.NaN(), MatMul8BytesPerSecond: 1}},
		"negative GPU":   {p2, Machine{DiskBytesPerSecond: 1, DiskBurstBytesPerSecond: 1, KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1, GPUFlops: -1}},
		"negative copy":  {p2, Machine{DiskBytesPerSecond: 1, DiskBurstBytesPerSecond: 1, KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1, ReadCPUSecondsPerByte: -1, Cores: 2}},
		"copy, no cores": {p2, Machine{DiskBytesPerSecond: 1, DiskBurstBytesPerSecond: 1, KernelBytesPerSecond: 1, MatMul8BytesPerSecond: 1, ReadCPUSecondsPerByte: 1e-9}},
		"negative slots": {Model{ExpertLayers: 1, ExpertsPerLayer: 4, ExpertsPerToken: 2, ExpertBytes: 1, PrefillSegment: 1, CacheSlotsPerLayer: -1}, ok},
		"acceptance 2":   {withMTP(&Drafting{Acceptance: 2}), ok},
		"union 3":        {withMTP(&Drafting{Acceptance: 0.5, Union: 3}), ok},
		"union 0.5":      {withMTP(&Drafting{Acceptance: 0.5, Union: 0.5}), ok},
		"negative MTP":   {Model{ExpertLayers: 1, ExpertsPerLayer: 4, ExpertsPerToken: 2, ExpertBytes: 1, PrefillSegment: 1, MTPExpertBytes: -1}, ok},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Predict(tc.m, tc.mc); err == nil || !strings.HasPrefix(err.Error(), "speed: ") {
				t.Fatalf("err %v, want a speed: error", err)
			}
		})
	}
}

func TestChips(t *testing.T) {
	for _, tc := range []struct{ query, want string }{{"M4 Pro", "M4 Pro"}, {"m4-pro", "M4 Pro"}, {"Apple M1 Max", "M1 Max"}, {"m3", "M3"}} {
		c, err := LookupChip(tc.query)
		if err != nil || c.Name != tc.want {
			t.Errorf("LookupChip(%q) = %q, %v; want %q", tc.query, c.Name, err, tc.want)
		}
	}
	if _, err := LookupChip("M9 Ultra"); err == nil || !strings.Contains(err.Error(), "M4 Max") {
		t.Errorf("unknown chip: %v, want an error listing the known ones", err)
	}
	for _, c := range Chips() {
		mc := c.Machine()
		if !(mc.DiskBytesPerSecond > 1e9 && mc.DiskBytesPerSecond < 10e9) || !(mc.KernelBytesPerSecond > 10e9) || !(mc.GPUFlops > 1e12) {
			t.Errorf("%s: implausible figures %+v", c.Name, mc)
		}
		p, err := Predict(p2, mc)
		if err != nil || len(p.Assumptions) != 7 || !strings.Contains(p.Machine, c.Name) || p.AgentPrompt == nil || p.AgentPrompt.Device != "GPU" {
			t.Errorf("%s: %v, %d assumptions, machine %q", c.Name, err, len(p.Assumptions), p.Machine)
		}
	}
	// A faster SSD decodes a disk-bound model faster.
	m4, _ := LookupChip("M4")
	m4max, _ := LookupChip("M4 Max")
	a, _ := Predict(p2, m4.Machine())
	b, _ := Predict(p2, m4max.Machine())
	if !(b.DecodeTokensPerSecond > a.DecodeTokensPerSecond) {
		t.Errorf("M4 Max %g tok/s not above M4 %g", b.DecodeTokensPerSecond, a.DecodeTokensPerSecond)
	}
}

func validProbes() Probes {
	return Probes{
		Version: ProbesVersion, MeasuredAt: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC), Machine: "linux/amd64", Threads: 2,
		DiskBytesPerSecond: 1.2e9, DiskQueueDepth: 8, DiskDirect: true, DiskPath: "/models/p2",
		DiskBurstBytesPerSecond: 1.1e9, DiskBurstExperts: 8, ReadCPUSecondsPerByte: 0.1e-9, CoreShare: 0.75,
		KernelBytesPerSecond: 3e9, MatMul8BytesPerSecond: 0.5e9, MemoryReadBytesPerSecond: 7e9,
	}
}

func TestProbeFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache", "Spool", "speed-probes.json")
	if _, err := Load(path); !errors.Is(err, ErrNoProbes) {
		t.Fatalf("missing file: %v, want ErrNoProbes", err)
	}
	want := validProbes()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || got != want {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	// A replacement leaves no temporary file beside it.
	want.DiskBytesPerSecond = 5e9
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(ents) != 1 {
		t.Fatalf("directory holds %d entries (%v), want the probe file alone", len(ents), err)
	}
	if got, err = Load(path); err != nil || got.DiskBytesPerSecond != 5e9 {
		t.Errorf("replaced file reads %g GB/s", got.DiskBytesPerSecond/1e9)
	}
	if mc := FromProbes(got); mc.DiskBytesPerSecond != 5e9 || mc.Cores != 1.5 || !strings.Contains(mc.Name, "/models/p2") {
		t.Errorf("FromProbes = %+v", mc)
	}
}

func TestProbeFileRefusesBadContent(t *testing.T) {
	dir := t.TempDir()
	bad := validProbes()
	bad.DiskBytesPerSecond = 0
	if err := Save(filepath.Join(dir, "zero.json"), bad); err == nil {
		t.Error("saved probes without a disk rate")
	}
	for name, body := range map[string]string{
		"truncated":   `{"version": 2, "disk_bytes_per`,
		"old version": `{"version": 1, "disk_bytes_per_second": 1e9, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9}`,
		"no burst":    `{"version": 2, "disk_bytes_per_second": 1e9, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9}`,
		"no kernels":  `{"version": 2, "disk_bytes_per_second": 1e9, "disk_burst_bytes_per_second": 1e9}`,
		"negative":    `{"version": 2, "disk_bytes_per_second": 1e9, "disk_burst_bytes_per_second": 1e9, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9, "gpu_flops": -5}`,
		"core share":  `{"version": 2, "disk_bytes_per_second": 1e9, "disk_burst_bytes_per_second": 1e9, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9, "core_share": 1.5}`,
		"copy cost":   `{"version": 2, "disk_bytes_per_second": 1e9, "disk_burst_bytes_per_second": 1e9, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9, "read_cpu_seconds_per_byte": -1}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); err == nil || errors.Is(err, ErrNoProbes) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Load: %v, want an error naming %s", err, path)
			}
		})
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"version": 2, "threads": 2, "disk_bytes_per_second": 1e9, "disk_burst_bytes_per_second": 1e9, "read_cpu_seconds_per_byte": 1e-10, "kernel_bytes_per_second": 1e9, "matmul8_bytes_per_second": 1e9}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "p.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Load(path)
		if err != nil {
			return
		}
		if _, err := Predict(p2, FromProbes(p)); err != nil {
			t.Fatalf("valid probes %+v do not predict: %v", p, err)
		}
	})
}

// TestAgentPrompt: a 20,000-token agent prompt goes through in the plan's
// segments, each reading the experts it routes to once beside its
// products; a shorter segment reads more and takes longer; attention over
// every earlier key grows with the prompt's square, DSA's selection
// bounds it.
func TestAgentPrompt(t *testing.T) {
	eb := 18_915_328.0
	mc := Machine{Name: "vm", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 0.5e9, KernelBytesPerSecond: 4e9, MatMul8BytesPerSecond: 0.5e9}
	p, err := Predict(p2, mc)
	if err != nil {
		t.Fatal(err)
	}
	a := *p.AgentPrompt
	// 4 segments of 4096 and one of 3616, each touching (almost) every
	// one of the 64 experts of its 4 layers; 62 of 64 miss the cache.
	var read, seconds float64
	for _, s := range []float64{4096, 4096, 4096, 4096, 3616} {
		touched := 64 * (1 - math.Pow(56.0/64, s))
		r := 4 * touched * (62.0 / 64) * eb / 1e9
		c := (135e6*math.Ceil(s/8) + 4*touched*eb*math.Ceil(s*8/touched/8)) / 0.5e9
		read += r
		seconds += math.Max(r, c)
	}
	if a.Tokens != AgentPromptTokens || a.Segments != 5 || a.Device != "CPU" || math.Abs(a.ReadSeconds-read) > 1e-9*read || math.Abs(a.Seconds-seconds) > 1e-9*seconds {
		t.Errorf("agent prompt %+v, want 5 segments reading %.6g s in %.6g s", a, read, seconds)
	}
	if !strings.Contains(strings.Join(p.Assumptions, " "), "20000-token agent prompt goes through the model in 5 segment(s)") {
		t.Errorf("assumptions do not say how the agent prompt goes: %q", p.Assumptions)
	}

	// Read-bound (fast products), segments of 2048 read twice as much.
	fast := mc
	fast.MatMul8BytesPerSecond = 500e9
	short := p2
	short.PrefillSegment = 2048
	long, _ := Predict(p2, fast)
	if q, _ := Predict(short, fast); !(q.AgentPrompt.ReadBytes > 19*long.AgentPrompt.ReadBytes/10 && q.AgentPrompt.Seconds > long.AgentPrompt.Seconds && q.AgentPrompt.Segments == 10) {
		t.Errorf("segments of 2048: %+v, of 4096: %+v", q.AgentPrompt, long.AgentPrompt)
	}

	dense := p2
	dense.AttentionFlopsPerKey = 1e6
	d, _ := Predict(dense, mc)
	dsa := dense
	dsa.SelectedKeys = 2048
	s, _ := Predict(dsa, mc)
	if !(d.AgentPrompt.ComputeSeconds > s.AgentPrompt.ComputeSeconds && s.AgentPrompt.ComputeSeconds > a.ComputeSeconds) {
		t.Errorf("compute: dense attention %g s, DSA %g s, none %g s", d.AgentPrompt.ComputeSeconds, s.AgentPrompt.ComputeSeconds, a.ComputeSeconds)
	}
	if want := 1e6 * 20000.0 * 20001 / 2 / (cpuFlopsPerMatMul8Byte * 0.5e9); math.Abs(d.AgentPrompt.ComputeSeconds-a.ComputeSeconds-want) > 1e-6*want {
		t.Errorf("dense attention adds %g s, want %g", d.AgentPrompt.ComputeSeconds-a.ComputeSeconds, want)
	}
}

// TestAgentPromptNeedsContext: a context shorter than the agent prompt
// predicts none and says why.
func TestAgentPromptNeedsContext(t *testing.T) {
	m := p2
	m.Context = 8192
	p, err := Predict(m, Machine{Name: "m", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 1e9, KernelBytesPerSecond: 1e9, MatMul8BytesPerSecond: 1e9})
	if err != nil || p.AgentPrompt != nil || !strings.Contains(strings.Join(p.Assumptions, " "), "does not fit the 8192-token context") {
		t.Errorf("%v: agent prompt %+v, assumptions %q", err, p.AgentPrompt, p.Assumptions)
	}
}

func TestAttendedKeys(t *testing.T) {
	for _, tc := range []struct {
		from, n, selected int
		want              float64
	}{
		{0, 4, 0, 1 + 2 + 3 + 4}, {2, 3, 0, 3 + 4 + 5}, {0, 5, 3, 1 + 2 + 3 + 3 + 3}, {4, 2, 3, 3 + 3}, {1, 3, 3, 2 + 3 + 3},
	} {
		if got := attendedKeys(tc.from, tc.n, tc.selected); got != tc.want {
			t.Errorf("attendedKeys(%d, %d, %d) = %g, want %g", tc.from, tc.n, tc.selected, got, tc.want)
		}
	}
}

// withMTP is p2 with an MTP layer of GLM-5.2's storage (int8 experts of
// 37,789,696 bytes, 100 MB dense) and drafting assumed d.
func withMTP(d *Drafting) Model {
	m := p2
	m.MTPExpertBytes, m.MTPDenseBytes, m.Drafting = 37_789_696, 100_000_000, d
	return m
}

// TestPredictDrafting works drafted decode out by hand on P2 with an MTP
// layer: a step reads union times a token's experts in each of the 4
// layers, and the MTP layer's 8 experts times 1 + a(union-1) (one
// position after a missed draft, two after an accepted one), each less the
// cached share, and applies the MTP layer's dense weights too; it emits
// 1 + a tokens. The gate's rule picks the mode.
func TestPredictDrafting(t *testing.T) {
	eb, mb := 18_915_328.0, 37_789_696.0
	vm := Machine{Name: "vm", DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 0.8e9, KernelBytesPerSecond: 4e9, MatMul8BytesPerSecond: 1e9}
	fast := Machine{Name: "memory", DiskBytesPerSecond: 1e12, DiskBurstBytesPerSecond: 1e12, KernelBytesPerSecond: 4e9, MatMul8BytesPerSecond: 1e9}
	for _, tc := range []struct {
		name       string
		d          *Drafting
		mc         Machine
		a, u       float64 // the assumptions the prediction must state
		wantChoice string
	}{
		// The default: 0.8 accepted, two positions reading 2 - 8/64 of a
		// token's experts; on a disk-bound machine the union costs more
		// than the accepted drafts save.
		{"default, disk-bound", nil, vm, 0.8, 1.875, "plain"},
		{"rarely accepted", &Drafting{Acceptance: 0.05}, vm, 0.05, 1.875, "plain"},
		// Consecutive positions sharing their experts: drafts cost the
		// MTP layer alone, and pay.
		{"shared experts, always accepted", &Drafting{Acceptance: 1, Union: 1}, vm, 1, 1, "draft"},
		// Reads are free: a step costs its products, two positions'
		// union and the MTP layer's, for 1.9 tokens.
		{"compute-bound, mostly shared", &Drafting{Acceptance: 0.9, Union: 1.2}, fast, 0.9, 1.2, "draft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(withMTP(tc.d), tc.mc)
			if err != nil {
				t.Fatal(err)
			}
			d := p.Drafting
			if d == nil {
				t.Fatal("no drafting prediction")
			}
			a, u := tc.a, tc.u
			hit := 2.0 / 64
			mtp := 8 * (1 + a*(u-1)) * mb
			miss := 4*8*u*(1-hit)*eb + mtp*(1-hit)
			kr := tc.mc.KernelBytesPerSecond
			disk := miss/tc.mc.DiskBurstBytesPerSecond + (4*eb+mb)/kr + 235e6/kr
			cores := (4*8*u*eb+mtp)/kr + 235e6/kr
			step := math.Max(disk, cores)
			if d.Acceptance != a || d.Union != u {
				t.Errorf("assumed acceptance %g union %g, want %g %g", d.Acceptance, d.Union, a, u)
			}
			if got, want := d.DecodeTokensPerSecond, (1+a)/step; math.Abs(got-want) > 1e-9*want {
				t.Errorf("drafted %.6g tok/s, want %.6g", got, want)
			}
			if got, want := d.DecodeReadBytesPerToken, int64(math.Round(miss/(1+a))); got != want {
				t.Errorf("drafted %d bytes a token, want %d", got, want)
			}
			if d.Choice != tc.wantChoice {
				t.Errorf("choice %s (drafted %.3f tok/s, %d B/token; plain %.3f tok/s, %d B/token), want %s",
					d.Choice, d.DecodeTokensPerSecond, d.DecodeReadBytesPerToken, p.DecodeTokensPerSecond, p.DecodeReadBytesPerToken, tc.wantChoice)
			}
			words := strings.Join(p.Assumptions, " ")
			for _, w := range []string{fmt.Sprintf("accepted %.0f%%", 100*a), fmt.Sprintf("%.2fx a token's experts", u), "would choose " + tc.wantChoice} {
				if !strings.Contains(words, w) {
					t.Errorf("assumptions do not say %q: %s", w, words)
				}
			}
		})
	}
	// Without an MTP layer nothing is drafted, and the words say so.
	p, err := Predict(p2, vm)
	if err != nil {
		t.Fatal(err)
	}
	if p.Drafting != nil || !strings.Contains(strings.Join(p.Assumptions, " "), "no MTP layer") {
		t.Errorf("drafting %+v without an MTP layer; assumptions %q", p.Drafting, p.Assumptions)
	}
}
