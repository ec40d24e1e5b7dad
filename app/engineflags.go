package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
)

// The flags of the commands that open an engine (run, serve, app) and
// what they resolve to in engine/host's terms: --memory and
// --expert-cache, --prompt-cache and --prompt-cache-max, --gpu.

// gpuFlag is --gpu, shared by run, serve and app.
type gpuFlag struct{ mode string }

func (g *gpuFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.mode, "gpu", host.GPUAuto, `prefill on the GPU through Vulkan: auto (a GPU whose memory holds the plan), on (any Vulkan device, CPU ones too), off`)
}

// check validates the mode ("" is auto).
func (g *gpuFlag) check() (string, error) { return host.CheckGPUMode(g.mode) }

// printInspectGPU is the GPU line of spool inspect.
func printInspectGPU(out io.Writer, st host.GPUStatus) error {
	if !st.Active {
		_, err := fmt.Fprintf(out, "gpu: not used (%s); prefill runs on the CPU\n", st.Reason)
		return err
	}
	var parts []string
	for _, it := range st.Plan.Items {
		parts = append(parts, fmt.Sprintf("%s %s", it.Name, plan.SizeText(it.Bytes)))
	}
	where := "device memory"
	if st.Device.Unified {
		where = "memory shared with the host, in the process plan"
	}
	_, err := fmt.Fprintf(out, "gpu: prefill on %s; GPU plan %s of %s (%s)\n", st.Device, plan.SizeText(st.Plan.DeviceBytes), where, strings.Join(parts, ", "))
	return err
}

// memoryFlags are the --memory and --expert-cache flags shared by fit, run
// and serve.
type memoryFlags struct{ host.Memory }

// register adds --memory, --expert-cache and --kv-cache to fs.
func (m *memoryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.Budget, "memory", "", "memory budget, OS reserve included, e.g. 32GiB or 24GB (default: the machine's memory)")
	fs.StringVar(&m.ExpertCache, "expert-cache", "", "LRU + pinned expert slot memory beyond the working bank, e.g. 8GiB (default: what the plan leaves)")
	fs.StringVar(&m.KVCache, "kv-cache", host.KVFloat32, "KV cache type: f32 (exact, the default) or bf16 (half the memory: longer contexts, each cached value rounded)")
}

// promptCacheOff is the --prompt-cache value that turns the cache off.
const promptCacheOff = "off"

// promptCacheFlags are --prompt-cache and --prompt-cache-max.
type promptCacheFlags struct {
	dir string
	max string
}

func (f *promptCacheFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dir, "prompt-cache", "", `prompt cache directory: the state of prompt prefixes, kept across requests and restarts so that a repeated prefix is not read again (default: Spool/prompt-cache in the user's cache directory; "off" turns the prompt cache off)`)
	fs.StringVar(&f.max, "prompt-cache-max", "", "disk space the prompt cache may use, e.g. 20GiB (default: a tenth of its volume, between 1 GiB and 64 GiB)")
}

// resolve checks the flags and fills in the defaults.
func (f promptCacheFlags) resolve() (host.PromptCache, error) {
	if f.dir == promptCacheOff {
		if f.max != "" {
			return host.PromptCache{}, fmt.Errorf("--prompt-cache-max needs a prompt cache, but --prompt-cache is %s", promptCacheOff)
		}
		return host.PromptCache{Off: true}, nil
	}
	s := host.PromptCache{Dir: f.dir, Build: engineBuild()}
	if s.Dir == "" {
		var err error
		if s.Dir, err = promptcache.DefaultDir(); err != nil {
			return s, fmt.Errorf("--prompt-cache: %w", err)
		}
	}
	if f.max == "" {
		s.DiskBytes = promptcache.DefaultDiskBytes(s.Dir)
		return s, nil
	}
	var err error
	if s.DiskBytes, err = plan.ParseSize(f.max); err != nil {
		return s, fmt.Errorf("--prompt-cache-max: %w", err)
	}
	return s, nil
}

// engineBuild names this build's numerics for the prompt cache's identity:
// the version, or for a development build its commit (a build with local
// changes is marked, and its blocks are shared only with builds of the
// same commit and marking).
func engineBuild() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	b := version
	for _, kv := range info.Settings {
		switch {
		case kv.Key == "vcs.revision":
			b += "+" + kv.Value
		case kv.Key == "vcs.modified" && kv.Value == "true":
			b += "-modified"
		}
	}
	return b
}

// warnSecretFlags says, for each secret given as a flag of cmd (the API
// key, the remote's key), that every local user can read it (the process
// list, /proc/PID/cmdline) and which variable keeps it out of sight.
func warnSecretFlags(cmd *cobra.Command, stderr io.Writer) {
	for _, f := range [][2]string{{"api-key", "SPOOL_API_KEY"}, {"remote-key", "SPOOL_REMOTE_KEY"}} {
		if fl := cmd.Flags().Lookup(f[0]); fl != nil && fl.Changed {
			fmt.Fprintf(stderr, "spool: --%s can be read by every user of this machine in the process list; set $%s instead\n", f[0], f[1])
		}
	}
}
