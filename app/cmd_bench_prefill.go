package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
)

// PrefillOptions are spool bench prefill's flags: the harness's options and
// what the command itself reads.
type PrefillOptions struct {
	bench.PrefillOptions
	model  string
	mem    memoryFlags
	gpu    gpuFlag
	asJSON bool
}

func newBenchPrefillCmd() *cobra.Command {
	var f PrefillOptions
	cmd := &cobra.Command{
		Use:   "prefill --model DIR",
		Short: "Measure prefill speed, expert bytes read and peak memory against the plan",
		Long: `Prefill runs one prompt of --tokens seeded random ids through the model the
way spool run does (in the plan's prefill segments, each layer over every
token of a segment, with the plan's buffers) and reports prefill tok/s, the process's peak footprint against the plan's planned process bytes,
and with streamed experts (--stream, or when the plan cannot keep every
expert) the expert bytes read from storage: per prompt token, per byte of
the model's routed experts, and as a multiple of the experts the prompt was
routed to (1 = each read once).

--compare-chunk N adds the chunked leg in the same run: the same prompt
forwarded in chunks of N rows, each chunk reading every routed expert it
needs (how prefill read a prompt before segments), with the same plan and
expert cache. segment_speedup is the chunked time over the segment's
(best of --repeat runs each, alternated); both legs report the expert bytes
they read and their first token.

--compare-all-keys runs the same prefill a second way in the same run: DSA
layers compute every causal key and mask the unselected ones, as attention
did before it was sparse. dsa_speedup is that time over the sparse time
(best of --repeat runs each, alternated).

--gpu adds a GPU leg in the same run: the same prompt in segments of the
same length with their heavy steps on the GPU (Vulkan). auto (the default) adds it
when a GPU whose memory holds the plan's GPU lines is found (not a CPU
implementation of Vulkan), on requires one (lavapipe counts) and fails
without it, off runs the CPU alone. gpu_speedup is the CPU time over the
GPU time; the gpu object names the device and its memory lines.

Each run starts from a freshly loaded model with a cold expert cache, so a
leg's time includes reading the experts the prompt routes to. --warm first
prefills the prompt once, untimed, on the loaded model: the timed run then
measures compute with the experts cached (as far as the cache holds them)
and the GPU's pipelines built. --warm=gpu warms the GPU leg only: the CPU
reads experts while it computes, so its cold time is already its compute
time, and the warm-up would only double the run.

Use the gen-bench model for real I/O and the sparse-files skeleton for the
real geometry.`,
		Example: `  spool bench prefill --model assets/models/glm52-demo --tokens 16000 --compare-all-keys --json
  spool gen-bench --out /tmp/bench --sparse-layers 4 --experts 64
  spool bench prefill --model /tmp/bench --tokens 2048 --stream --cache-slots 2 --json
  spool gen-bench --out /tmp/skeleton --sparse-files
  spool bench prefill --model /tmp/skeleton --tokens 512 --gpu on --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Tokens < 1 {
				return fmt.Errorf("--tokens must be positive, got %d", f.Tokens)
			}
			if f.Repeat < 1 {
				return fmt.Errorf("--repeat must be positive, got %d", f.Repeat)
			}
			if f.CacheSlots < 0 {
				return fmt.Errorf("--cache-slots must not be negative, got %d", f.CacheSlots)
			}
			if f.CacheSlots > 0 && f.mem.ExpertCache != "" {
				return errors.New("--cache-slots and --expert-cache both size the expert cache; give one")
			}
			if f.Context == 0 {
				f.Context = f.Tokens + 1
			}
			if mode, err := f.gpu.check(); err != nil {
				return err
			} else if f.GPUOnly && (mode == host.GPUOff || f.AllKeys) {
				return errors.New("--gpu-only needs --gpu auto or on, and no --compare-all-keys")
			}
			if f.Context <= f.Tokens {
				return fmt.Errorf("--context %d must exceed --tokens %d (the prompt and the token sampled after it)", f.Context, f.Tokens)
			}
			dir, err := host.ResolveModelDir(f.model)
			if err != nil {
				return err
			}
			f.Memory, f.GPU = f.mem.Memory, f.gpu.mode
			res, err := bench.Prefill(cmd.Context(), dir, &f.PrefillOptions)
			if err != nil {
				return err
			}
			return printPrefillBench(cmd, res, f.asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default: $SPOOL_MODEL, then the demo model)")
	f.mem.register(fl)
	fl.IntVar(&f.Tokens, "tokens", 2048, "prompt tokens")
	fl.IntVar(&f.Context, "context", 0, "context length planned (default: --tokens + 1)")
	fl.IntVar(&f.CacheSlots, "cache-slots", 0, "expert cache slots per expert layer (instead of --expert-cache)")
	fl.BoolVar(&f.Stream, "stream", false, "stream experts from disk even when the plan could keep them all")
	fl.BoolVar(&f.AllKeys, "compare-all-keys", false, "also run the prefill with every key computed on DSA layers and report the speedup")
	fl.IntVar(&f.CompareChunk, "compare-chunk", 0, "also run the prefill in chunks of this many rows, each reading its routed experts, and report the segment's speedup over it")
	fl.StringVar(&f.gpu.mode, "gpu", host.GPUAuto, "also run the prefill on the GPU and report the speedup: auto (when a GPU, not a CPU Vulkan device, holds the plan), on (any Vulkan device; fail without one), off")
	fl.StringVar(&f.Warm, "warm", "", "prefill the prompt once, untimed, before each timed run (warm expert cache and GPU pipelines); --warm=gpu: the GPU leg only")
	fl.Lookup("warm").NoOptDefVal = "all"
	fl.IntVar(&f.Repeat, "repeat", 1, "runs of each leg (alternated; the fastest counts)")
	fl.Uint64Var(&f.Seed, "seed", 1, "seed of the prompt ids")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&f.GPUOnly, "gpu-only", false, "run the GPU leg alone (to profile it): no CPU leg and no speedup")
	fl.BoolVar(&f.CopyExperts, "copy-experts", false, "the GPU leg copies routed experts into its bank even where the device could use them in place (unified memory): to measure the copies")
	fl.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of the first timed run of the GPU leg (of the CPU leg without one) to this file")
	return cmd
}

func printPrefillBench(cmd *cobra.Command, r *bench.PrefillResult, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%d expert layers x %d experts, DSA %v)\n", r.Model, r.ExpertLayers, r.ExpertsPerLayer, r.DSA)
	fmt.Fprintf(tw, "prompt\t%d tokens, context %d, segments of %d rows (steps of %d), warm %v\n", r.PromptTokens, r.Context, r.SegmentRows, r.ScratchRows, r.Warm)
	leg := func(name string, l *bench.PrefillLeg) {
		fmt.Fprintf(tw, "%s\t%.2fs: %.1f tok/s (runs %v); %.1f experts routed per expert layer\n", name, l.Seconds, l.TokensPerSecond, l.RunSeconds, l.ExpertsTouchedPerLayer)
		if r.Streamed && l.ExpertBytesRead > 0 {
			fmt.Fprintf(tw, "  expert bytes read\t%s in %d reads: %s per token, %.3f per model byte, %.3fx the %d experts routed (%s)\n",
				plan.SizeText(l.ExpertBytesRead), l.ExpertsRead, plan.SizeText(int64(l.ExpertBytesPerToken)), l.ExpertBytesPerModelByte,
				l.ReadOverTouched, l.ExpertsTouched, plan.SizeText(l.TouchedExpertBytes))
			fmt.Fprintf(tw, "  experts routed\tat least %.1f%% of each layer's\n", 100*l.MinLayerTouchedShare)
		}
	}
	if r.Prefill.Seconds > 0 {
		leg("prefill", &r.Prefill)
	}
	if r.Chunked != nil {
		leg(fmt.Sprintf("chunks of %d", r.ChunkRows), r.Chunked)
		fmt.Fprintf(tw, "segment speedup\t%.2fx\t(chunked / segment; same first token %v)\n", r.SegmentSpeedup, *r.ChunkedSameFirstToken)
	}
	if r.AllKeys != nil {
		leg("all keys computed", r.AllKeys)
		fmt.Fprintf(tw, "DSA speedup\t%.2fx\t(all keys / sparse; same first token %v)\n", r.DSASpeedup, *r.SameFirstToken)
	}
	if r.GPUPrefill != nil {
		leg("GPU prefill", r.GPUPrefill)
		if t := r.GPUPrefill.GPUTimes; t != nil {
			fmt.Fprintf(tw, "  routed experts\t%d copied, %d resident on the device, %d in place; copy wait %.2fs (%.1f%% of the leg)\n",
				t.ExpertsCopied, t.ExpertsResident, t.ExpertsInPlace, r.GPUPrefill.CopyWaitSeconds, 100*r.GPUPrefill.CopyWaitShare)
		}
		if r.GPUSameFirstToken != nil {
			fmt.Fprintf(tw, "GPU speedup\t%.2fx\t(CPU / GPU on %s, %d CPU threads; same first token %v)\n", r.GPUSpeedup, r.GPU.Device, r.Threads, *r.GPUSameFirstToken)
		}
	} else if r.GPU.Mode != host.GPUOff {
		fmt.Fprintf(tw, "GPU\tnot used: %s\n", r.GPU.Reason)
	}
	if r.Streamed {
		fmt.Fprintf(tw, "expert cache\t%d slots per layer, direct I/O %v\n", r.CacheSlotsPerLayer, r.DirectIO)
	}
	fmt.Fprintf(tw, "peak\tRSS %s, footprint %s; plan %s (%.2f of it); attention workspace %s\n",
		plan.SizeText(r.PeakRSSBytes), plan.SizeText(r.PeakFootprintBytes), plan.SizeText(r.PlannedProcessBytes), r.PeakOverPlan,
		plan.SizeText(r.AttentionWorkspaceBytes))
	return tw.Flush()
}
