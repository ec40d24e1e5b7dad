package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/modeldir"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// gpuBenchResult is the --json output of spool bench gpu.
type gpuBenchResult struct {
	Model       string    `json:"model"`
	Device      *gpu.Info `json:"device"`
	Threads     int       `json:"threads"`
	CPUFeatures string    `json:"cpu_features"`
	Tokens      int       `json:"tokens"`
	Chunk       int       `json:"chunk"`

	// Prefill of the same prompt from an empty cache, CPU then GPU.
	CPUPrefillSeconds         float64 `json:"cpu_prefill_seconds"`
	CPUPrefillTokensPerSecond float64 `json:"cpu_prefill_tokens_per_second"`
	GPUPrefillSeconds         float64 `json:"gpu_prefill_seconds"`
	GPUPrefillTokensPerSecond float64 `json:"gpu_prefill_tokens_per_second"`
	Ratio                     float64 `json:"ratio"` // GPU over CPU tok/s
	// LogitMaxAbsDiff compares the last row's logits of the two prefills.
	LogitMaxAbsDiff float64 `json:"logit_max_abs_diff"`

	// ExpertsPerLayerChunk is the mean number of distinct routed experts a
	// layer applied per chunk (each copied into device memory once);
	// UniformExperts what uniform routing would apply, and
	// ProjectedUniformTokensPerSecond the GPU prefill rate with the
	// difference copied at UploadBytesPerSecond.
	ExpertsPerLayerChunk            float64 `json:"experts_per_layer_chunk"`
	UniformExperts                  float64 `json:"uniform_experts_per_layer_chunk"`
	UploadBytesPerSecond            float64 `json:"upload_bytes_per_second"`
	ProjectedUniformTokensPerSecond float64 `json:"projected_uniform_routing_tokens_per_second"`

	MatMul []matMulBench `json:"matmul"`
}

// matMulBench is one shape of the kernel comparison.
type matMulBench struct {
	Name       string  `json:"name"`
	Format     string  `json:"format"`
	Rows, Cols int     `json:"-"`
	Shape      string  `json:"shape"`
	N          int     `json:"n"`
	CPUGFLOPS  float64 `json:"cpu_gflops"`
	GPUGFLOPS  float64 `json:"gpu_gflops"`        // with the rows' upload and read-back
	KernelGF   float64 `json:"gpu_kernel_gflops"` // the product alone
	KernelGain float64 `json:"ratio"`             // kernel over CPU
	Tile       string  `json:"tile,omitempty"`
}

func newBenchGPUCmd() *cobra.Command {
	var (
		modelDir string
		tokens   int
		chunk    int
		seed     uint64
		asJSON   bool
		skipCPU  bool
		mem      memoryFlags
		tiles    bool
		profile  string
	)
	cmd := &cobra.Command{
		Use:   "gpu --model DIR",
		Short: "Prefill on the GPU against the CPU, and the GPU kernels against the CPU kernels",
		Long: `Bench gpu prefills the same pseudo-random prompt from an empty cache twice in
one run, on the CPU and on the GPU (Vulkan, any device), in --chunk-token
forwards, and reports both rates and their ratio. It needs no tokenizer, so
it runs on gen-bench models and the real-geometry skeleton (gen-bench
--sparse-files). It also times the int4/int8 matrix products of GLM-5.2's
shapes over --chunk rows on both, and the host-to-device copy rate that
routed experts take on a discrete GPU.

On a skeleton (zero weights) every router ties and picks the same eight
experts; the result then also projects the GPU rate under uniform routing,
which copies about every expert of a layer once per chunk.`,
		Example: `  spool gen-bench --out /tmp/skeleton --sparse-files
  spool bench gpu --model /tmp/skeleton --tokens 512 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokens <= 0 || chunk <= 0 {
				return fmt.Errorf("--tokens and --chunk must be positive, got %d and %d", tokens, chunk)
			}
			res, err := benchGPU(cmd.Context(), modelDir, tokens, chunk, seed, !skipCPU, tiles, profile, &mem, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			return printGPUBench(cmd.OutOrStdout(), res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	fl.IntVar(&tokens, "tokens", 512, "prompt tokens to prefill")
	fl.IntVar(&chunk, "chunk", 512, "prompt tokens per forward")
	fl.Uint64Var(&seed, "seed", 1, "seed of the prompt")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&skipCPU, "no-cpu", false, "skip the CPU prefill (the kernel comparison still runs)")
	fl.BoolVar(&tiles, "tiles", false, "time every matrix-product tile on the kernel shapes")
	fl.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the GPU prefill to this file")
	mem.register(fl)
	cmd.MarkFlagRequired("model")
	return cmd
}

// countingSource counts the experts each Acquire asks for.
type countingSource struct {
	experts.Source
	mu              sync.Mutex
	acquires, asked int
}

func (s *countingSource) Acquire(ctx context.Context, layer int, ids []int) (experts.Lease, error) {
	s.mu.Lock()
	s.acquires++
	s.asked += len(ids)
	s.mu.Unlock()
	return s.Source.Acquire(ctx, layer, ids)
}

func (s *countingSource) reset() (acquires, asked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, n := s.acquires, s.asked
	s.acquires, s.asked = 0, 0
	return a, n
}

func benchGPU(ctx context.Context, dir string, tokens, chunk int, seed uint64, withCPU, tiles bool, profile string, mem *memoryFlags, log io.Writer) (*gpuBenchResult, error) {
	d, err := modeldir.OpenHeaders(dir)
	if err != nil {
		return nil, err
	}
	g := openGPU(gpuOn, log)
	if g.dev == nil {
		d.Close()
		return nil, fmt.Errorf("no GPU: %s", g.Status().Reason)
	}
	ctxLen := min(tokens+chunk, d.Config.MaxPositionEmbeddings)
	w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
	if err != nil {
		g.Close()
		d.Close()
		return nil, err
	}
	popts, err := mem.options()
	if err != nil {
		g.Close()
		d.Close()
		return nil, err
	}
	popts.Context, popts.Sequences, popts.BatchRows = ctxLen, 1, chunk
	popts.Extra = g.linesFor(d.Config, w, ctxLen, chunk)
	p, err := plan.New(d.Config, w, popts)
	if err == nil {
		err = p.Err()
	}
	if err != nil {
		g.Close()
		d.Close()
		return nil, err
	}
	var counter *countingSource
	opts := modeldir.Options{Model: model.Options{DisableMTP: true}}
	build := func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
		var src experts.Source
		var err error
		if p.AllExpertsCached() {
			src, err = experts.LoadResident(ctx, modeldir.ExpertLoader{C: c, Config: cfg}, layers, cfg.NumRoutedExperts)
		} else {
			src, err = streamedExperts(p, "")(ctx, c, cfg, layers)
		}
		if err != nil {
			return nil, err
		}
		counter = &countingSource{Source: src}
		return counter, nil
	}
	opts.Experts = build
	if err := d.Load(ctx, opts); err != nil {
		g.Close()
		d.Close()
		return nil, err
	}
	defer d.Close()
	defer g.Close()
	m := d.Model
	cfg := m.Config()
	info := g.dev.Info()
	res := &gpuBenchResult{Model: dir, Device: &info, Threads: runtime.GOMAXPROCS(0), CPUFeatures: kernels.Features(), Tokens: tokens, Chunk: chunk}

	r := rand.New(rand.NewPCG(seed, 7))
	prompt := make([]int, tokens)
	for i := range prompt {
		prompt[i] = r.IntN(cfg.VocabSize)
	}
	fmt.Fprintf(log, "bench gpu: kernels over %d rows\n", chunk)
	if err := benchKernels(res, cfg, chunk, tiles, log); err != nil {
		return nil, err
	}

	var cpuLast []float32
	if withCPU {
		// Warm up: the weights' and experts' pages, as the GPU's warm-up
		// chunk does for it.
		if _, _, err := timePrefill(ctx, m, prompt[:min(tokens, 16)], chunk); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "bench gpu: CPU prefill of %d tokens\n", tokens)
		var secs float64
		if secs, cpuLast, err = timePrefill(ctx, m, prompt, chunk); err != nil {
			return nil, err
		}
		res.CPUPrefillSeconds, res.CPUPrefillTokensPerSecond = secs, float64(tokens)/secs
	}
	if g.attach(m, p); !m.Accelerated() {
		return nil, fmt.Errorf("the GPU backend could not start: %s", g.Status().Reason)
	}
	// Warm up: pipelines are built and buffers sized on first use.
	if _, _, err := timePrefill(ctx, m, prompt[:min(tokens, chunk)], chunk); err != nil {
		return nil, err
	}
	counter.reset()
	fmt.Fprintf(log, "bench gpu: GPU prefill of %d tokens\n", tokens)
	stop, err := startProfile(profile)
	if err != nil {
		return nil, err
	}
	secs, gpuLast, err := timePrefill(ctx, m, prompt, chunk)
	stop()
	if err != nil {
		return nil, err
	}
	if !m.Accelerated() {
		return nil, fmt.Errorf("the GPU failed during the prefill: %s", g.Status().Reason)
	}
	res.GPUPrefillSeconds, res.GPUPrefillTokensPerSecond = secs, float64(tokens)/secs
	if res.CPUPrefillTokensPerSecond > 0 {
		res.Ratio = res.GPUPrefillTokensPerSecond / res.CPUPrefillTokensPerSecond
		for i := range cpuLast {
			res.LogitMaxAbsDiff = max(res.LogitMaxAbsDiff, math.Abs(float64(cpuLast[i]-gpuLast[i])))
		}
	}
	acquires, asked := counter.reset()
	if acquires > 0 {
		res.ExpertsPerLayerChunk = float64(asked) / float64(acquires)
		chunks := (tokens + chunk - 1) / chunk
		E, k := float64(cfg.NumRoutedExperts), float64(cfg.ExpertsPerToken)
		rows := float64(tokens) / float64(chunks)
		res.UniformExperts = E * (1 - math.Pow(1-k/E, rows))
		extra := (res.UniformExperts - res.ExpertsPerLayerChunk) * float64(acquires) * float64(w.MainExpertBytes())
		res.ProjectedUniformTokensPerSecond = float64(tokens) / (secs + max(0, extra)/res.UploadBytesPerSecond)
	}
	return res, nil
}

// startProfile starts a CPU profile into path ("" profiles nothing) and
// returns the function that stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// timePrefill prefills prompt into a fresh sequence in chunks and returns
// the seconds and the last row's logits.
func timePrefill(ctx context.Context, m *model.Model, prompt []int, chunk int) (float64, []float32, error) {
	seq := m.NewSequence(len(prompt))
	var last []float32
	start := time.Now()
	for i := 0; i < len(prompt); i += chunk {
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: prompt[i:min(i+chunk, len(prompt))]}}, nil)
		if err != nil {
			return 0, nil, err
		}
		last = out[0].Logits[0]
	}
	return time.Since(start).Seconds(), last, nil
}

// benchKernels fills in the kernel comparison and the host-to-device copy
// rate, on a device of its own (the run's device holds only what its plan
// counts).
func benchKernels(res *gpuBenchResult, cfg *config.Config, n int, tiles bool, log io.Writer) error {
	dev, err := gpu.Open(gpu.Options{Device: res.Device.Index})
	if err != nil {
		return err
	}
	defer dev.Close()
	if res.MatMul, err = benchMatMuls(cfg, dev, n, tiles, log); err != nil {
		return err
	}
	up := make([]byte, 256<<20)
	for i := range up {
		up[i] = byte(i)
	}
	res.UploadBytesPerSecond, err = dev.BenchUpload(up, 3)
	return err
}

// benchMatMuls times GLM-5.2's largest products over n rows on the CPU
// and the GPU, in the model's int4 format (and int8).
func benchMatMuls(cfg *config.Config, dev *gpu.Device, n int, tiles bool, log io.Writer) ([]matMulBench, error) {
	H, nh := cfg.HiddenSize, cfg.NumHeads
	shapes := []matMulBench{
		{Name: "o_proj", Format: "int4-g64", Rows: H, Cols: nh * cfg.VHeadDim},
		{Name: "expert gate", Format: "int4-row", Rows: cfg.MoEIntermediateSize, Cols: H},
		{Name: "q_b_proj", Format: "int8-row", Rows: nh * cfg.QKHeadDim(), Cols: cfg.QLoraRank},
	}
	r := rand.New(rand.NewPCG(3, 5))
	x := make([]float32, n*max(H, nh*cfg.VHeadDim, cfg.QLoraRank))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var out []matMulBench
	for _, s := range shapes {
		w := benchMatrix(r, s.Format, s.Rows, s.Cols)
		y := make([]float32, n*s.Rows)
		flop := 2 * float64(s.Rows) * float64(s.Cols) * float64(n)
		start := time.Now()
		reps := 0
		for time.Since(start) < time.Second || reps < 2 {
			kernels.MatMul(y, w, x, n)
			reps++
		}
		s.CPUGFLOPS = flop * float64(reps) / time.Since(start).Seconds() / 1e9
		if err := dev.Keep(w); err != nil {
			return nil, err
		}
		t, err := dev.BenchMatMul(w, x, n, 10)
		if err != nil {
			return nil, err
		}
		s.Shape, s.N = fmt.Sprintf("%dx%d", s.Rows, s.Cols), n
		s.GPUGFLOPS, s.KernelGF = flop/t.WithTransfers/1e9, flop/t.Kernel/1e9
		s.KernelGain = s.KernelGF / s.CPUGFLOPS
		out = append(out, s)
		fmt.Fprintf(log, "  %s %s: CPU %.0f GFLOP/s, GPU %.0f (kernel %.0f)\n", s.Name, s.Shape, s.CPUGFLOPS, s.GPUGFLOPS, s.KernelGF)
		if !tiles {
			continue
		}
		for _, tk := range []int{16, 32} {
			for _, tl := range [][2]int{{64, 16}, {64, 32}, {64, 64}, {128, 64}, {128, 128}} {
				td, err := gpu.Open(gpu.Options{Device: dev.Info().Index, Tile: tl, TileK: tk})
				if err != nil {
					return nil, err
				}
				err = td.Keep(w)
				var t gpu.MatMulTiming
				if err == nil {
					t, err = td.BenchMatMul(w, x, n, 5)
				}
				td.Close()
				if err != nil {
					return nil, err
				}
				v := s
				v.Tile = fmt.Sprintf("%dx%dx%d", tl[0], tl[1], tk)
				v.GPUGFLOPS, v.KernelGF = flop/t.WithTransfers/1e9, flop/t.Kernel/1e9
				v.KernelGain = v.KernelGF / v.CPUGFLOPS
				out = append(out, v)
				fmt.Fprintf(log, "    tile %s: kernel %.0f GFLOP/s\n", v.Tile, v.KernelGF)
			}
		}
	}
	return out, nil
}

// benchMatrix is a random matrix of the format.
func benchMatrix(r *rand.Rand, format string, rows, cols int) *kernels.Matrix {
	m := &kernels.Matrix{Rows: rows, Cols: cols}
	switch format {
	case "int8-row":
		m.Format = kernels.Int8Row
	case "int4-g64":
		m.Format, m.GroupSize = kernels.Int4Group, 64
	default:
		m.Format = kernels.Int4Row
	}
	m.Data = make([]byte, rows*m.RowBytes())
	for i := range m.Data {
		m.Data[i] = byte(r.IntN(256))
	}
	m.Scales = make([]float32, rows*m.ScalesPerRow())
	for i := range m.Scales {
		m.Scales[i] = 0.01
	}
	return m
}

func printGPUBench(out io.Writer, res *gpuBenchResult) error {
	if res.Device == nil {
		return errors.New("no device")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "device\t%s\n", res.Device)
	fmt.Fprintf(tw, "cpu\t%d threads, %s\n", res.Threads, res.CPUFeatures)
	fmt.Fprintf(tw, "prefill\t%d tokens in chunks of %d\n", res.Tokens, res.Chunk)
	if res.CPUPrefillSeconds > 0 {
		fmt.Fprintf(tw, "  cpu\t%.2f tok/s\t(%.1f s)\n", res.CPUPrefillTokensPerSecond, res.CPUPrefillSeconds)
	}
	fmt.Fprintf(tw, "  gpu\t%.2f tok/s\t(%.1f s)\n", res.GPUPrefillTokensPerSecond, res.GPUPrefillSeconds)
	if res.Ratio > 0 {
		fmt.Fprintf(tw, "  ratio\t%.1fx\t(GPU / CPU; last-row logits differ by %.3g)\n", res.Ratio, res.LogitMaxAbsDiff)
	}
	fmt.Fprintf(tw, "experts\t%.1f per layer and chunk\t(uniform routing: %.1f; projected %.2f tok/s at %.1f GB/s host-to-device)\n",
		res.ExpertsPerLayerChunk, res.UniformExperts, res.ProjectedUniformTokensPerSecond, res.UploadBytesPerSecond/1e9)
	for _, s := range res.MatMul {
		name := s.Name
		if s.Tile != "" {
			name += " tile " + s.Tile
		}
		fmt.Fprintf(tw, "matmul %s\t%s %s x %d\tCPU %.0f GFLOP/s, GPU %.0f (kernel %.0f, %.1fx)\n", name, s.Format, s.Shape, s.N, s.CPUGFLOPS, s.GPUGFLOPS, s.KernelGF, s.KernelGain)
	}
	return tw.Flush()
}
