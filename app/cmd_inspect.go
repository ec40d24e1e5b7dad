package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/bytesize"
)

func newInspectCmd() *cobra.Command {
	var (
		model   string
		jsonOut bool
		gpuMode gpuFlag
	)
	cmd := &cobra.Command{
		Use:   "inspect --model DIR",
		Short: "Validate a model container against its config and summarize it",
		Long: `Inspect reads config.json and every safetensors header of a model directory
(no weights), checks that each tensor the config implies is present with a
byte count and format matching its shape, and prints the shards, the weight
formats, the MTP and DSA capabilities, the routed experts (size, and which
ones take more than one read) and the resident and routed byte totals, and
the GPU prefill would run on (--gpu) with its memory plan. An invalid
container prints every problem found and exits with status 1.`,
		Example: `  spool inspect --model ../shared/fixtures/glm52-mini
  spool inspect --model ~/models/glm52 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := gpuMode.check()
			if err != nil {
				return err
			}
			sum, cfg, w, err := inspectModel(model)
			if err != nil {
				return err
			}
			g := host.InspectGPU(mode, cfg, w)
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(struct {
					*container.Summary
					GPU host.GPUStatus `json:"gpu"`
				}{sum, g})
			}
			if err := printInspectSummary(cmd.OutOrStdout(), sum, cfg); err != nil {
				return err
			}
			return printInspectGPU(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "model directory (config.json and *.safetensors)")
	gpuMode.register(cmd.Flags())
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object")
	cmd.MarkFlagRequired("model")
	return cmd
}

// inspectModel loads the config and validates the container of dir.
func inspectModel(dir string) (*container.Summary, *config.Config, plan.Weights, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, nil, plan.Weights{}, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, nil, plan.Weights{}, err
	}
	defer c.Close()
	sum, err := container.Validate(c, cfg)
	if err != nil {
		return nil, nil, plan.Weights{}, err
	}
	w, err := plan.FromContainer(c, cfg, sum)
	if err != nil {
		return nil, nil, plan.Weights{}, err
	}
	return sum, cfg, w, nil
}

func printInspectSummary(out io.Writer, s *container.Summary, cfg *config.Config) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	var total int64
	for _, sh := range s.Shards {
		total += sh.Bytes
	}
	fmt.Fprintf(w, "model\t%s\n", s.Dir)
	fmt.Fprintf(w, "geometry\t%d layers (%d with routed experts), hidden %d, %d routed experts top-%d, vocab %d\n",
		cfg.NumLayers, len(cfg.SparseLayers()), cfg.HiddenSize, cfg.NumRoutedExperts, cfg.ExpertsPerToken, cfg.VocabSize)
	fmt.Fprintf(w, "capabilities\tMTP %s, DSA %s\n", inspectYesNo(s.MTP, "present", "absent"), inspectYesNo(s.DSA, "present", "absent (dense attention)"))
	fmt.Fprintf(w, "shards\t%d files, %s, %d tensors\n", len(s.Shards), inspectBytes(total), s.Tensors)
	for _, sh := range s.Shards {
		fmt.Fprintf(w, "  %s\t%s\t%d tensors\n", sh.Name, inspectBytes(sh.Bytes), sh.Tensors)
	}
	fmt.Fprintf(w, "formats\t\t\n")
	for _, f := range s.Formats {
		fmt.Fprintf(w, "  %s\t%s\t%d tensors\n", f.Format, inspectBytes(f.Bytes), f.Count)
	}
	ex := s.Experts
	fmt.Fprintf(w, "routed experts\t%d, %d in one read, %d split\n", ex.Count, ex.Coalesced, len(ex.Split))
	for _, sz := range ex.Sizes {
		fmt.Fprintf(w, "  %s\t%s\t%d experts\n", sz.Formats, inspectBytes(sz.Bytes), sz.Count)
	}
	if len(ex.Split) > 0 {
		names := make([]string, 0, len(ex.Split))
		for i, r := range ex.Split {
			if i == 10 {
				names = append(names, fmt.Sprintf("and %d more", len(ex.Split)-10))
				break
			}
			names = append(names, r.String())
		}
		fmt.Fprintf(w, "  split\t%s\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "resident bytes\t%s\n", inspectBytes(s.ResidentBytes))
	fmt.Fprintf(w, "routed bytes\t%s\n", inspectBytes(s.RoutedBytes))
	if len(s.Unexpected) > 0 {
		fmt.Fprintf(w, "unused tensors\t%d (%s), ignored: %s\n", len(s.Unexpected), inspectBytes(s.UnexpectedBytes), inspectNames(s.Unexpected, 5))
	}
	return w.Flush()
}

func inspectYesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// inspectBytes prints an exact byte count with a binary-unit approximation.
func inspectBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%d B (%s)", n, bytesize.IEC(n))
}

func inspectNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(", and %d more", len(names)-n)
}
