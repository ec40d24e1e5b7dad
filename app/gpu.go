package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/modeldir"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels/gpu"
)

// GPU modes of --gpu.
const (
	gpuAuto = "auto" // a GPU (not a CPU Vulkan device) whose memory holds the GPU plan
	gpuOn   = "on"   // any Vulkan device, a CPU implementation too (lavapipe)
	gpuOff  = "off"
)

// gpuFlag is --gpu, shared by run, serve and app.
type gpuFlag struct{ mode string }

func (g *gpuFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.mode, "gpu", gpuAuto, `prefill on the GPU through Vulkan: auto (a GPU whose memory holds the plan), on (any Vulkan device, CPU ones too), off`)
}

// check validates the mode ("" is auto).
func (g *gpuFlag) check() (string, error) {
	switch g.mode {
	case "", gpuAuto:
		return gpuAuto, nil
	case gpuOn, gpuOff:
		return g.mode, nil
	}
	return "", fmt.Errorf("--gpu must be auto, on or off, not %q", g.mode)
}

// gpuStatus is what `spool inspect`, /stats and the UI show about the GPU.
type gpuStatus struct {
	Mode string `json:"mode"`
	// Active reports that prefill chunks run on the device.
	Active bool      `json:"active"`
	Device *gpu.Info `json:"device,omitempty"`
	// Reason says why the GPU is not used, or why it stopped being used.
	Reason string        `json:"reason,omitempty"`
	Plan   *plan.GPUPlan `json:"plan,omitempty"`
}

// gpuBackend is a run's GPU: the open device (nil when not used) and its
// status. It is safe for concurrent use (the status changes when a
// failing device falls back to the CPU during a forward).
//
// It logs a line when prefill runs on the GPU, and when it does not
// although a GPU was asked for (--gpu on) or found (it failed or its
// memory is too small). In auto mode a machine without a usable GPU (no
// Vulkan device, a build without the backend, a CPU implementation of
// Vulkan) runs on the CPU quietly; the status says why.
type gpuBackend struct {
	log io.Writer
	// found is set once a usable device was opened.
	found bool

	mu     sync.Mutex
	dev    *gpu.Device
	status gpuStatus
}

// openGPU opens the Vulkan device for mode. Any failure leaves the
// backend unused, with the reason in its status.
func openGPU(mode string, log io.Writer) *gpuBackend {
	g := &gpuBackend{log: log, status: gpuStatus{Mode: mode}}
	if mode == gpuOff {
		g.status.Reason = "--gpu off"
		return g
	}
	dev, err := gpu.Open(gpu.Options{Device: -1})
	if err != nil {
		g.status.Reason = err.Error()
		if errors.Is(err, gpu.ErrUnavailable) {
			g.status.Reason = "this build has no GPU backend"
		}
		return g
	}
	info := dev.Info()
	g.status.Device = &info
	if mode == gpuAuto && info.Type == "cpu" {
		dev.Close()
		g.status.Reason = fmt.Sprintf("%s is a CPU implementation of Vulkan, slower than the CPU kernels (--gpu on uses it)", info.Name)
		return g
	}
	g.dev, g.found = dev, true
	return g
}

// planLines lays out the GPU plan of running d with context-token
// sequences and returns the lines that belong in the process plan: the
// staging, and on unified memory the device lines as well.
func (g *gpuBackend) planLines(d *modeldir.Dir, context int) []plan.Item {
	if g.dev == nil {
		return nil
	}
	w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
	if err != nil {
		g.dev.Close()
		g.dev = nil
		g.status.Reason = err.Error()
		return nil
	}
	if context <= 0 {
		context = plan.DefaultContext
	}
	context = min(context, d.Config.MaxPositionEmbeddings)
	return g.linesFor(d.Config, w, context, 0)
}

// linesFor is planLines for a config and its weights, with forwards of
// batchRows rows (0: the default).
func (g *gpuBackend) linesFor(cfg *config.Config, w plan.Weights, context, batchRows int) []plan.Item {
	info := g.dev.Info()
	gp := plan.GPU(cfg, w, plan.GPUOptions{BatchRows: batchRows, Context: context, Unified: info.Unified, InPlace: info.InPlace})
	g.status.Plan = &gp
	if info.Unified {
		return gp.Items
	}
	for _, it := range gp.Items {
		if it.Name == plan.ItemGPUStaging {
			return []plan.Item{it}
		}
	}
	return nil
}

// attach gives m the device as its backend when the GPU plan fits it, or
// says why not and closes the device. p is the run's plan.
func (g *gpuBackend) attach(m *model.Model, p *plan.Plan) {
	if g.dev == nil {
		g.report()
		return
	}
	if reason := g.misfit(); reason != "" {
		g.drop(reason)
		return
	}
	if g.dev.Info().Unified && !p.Fits {
		g.drop("the memory plan with the GPU lines does not fit")
		return
	}
	gp := g.status.Plan
	g.dev.SetLimits(gp.DeviceBytes, gp.BankBytes)
	err := m.SetBackend(g.dev, model.BackendOptions{OnFallback: func(err error) { g.drop("failed: " + err.Error()) }})
	if err != nil {
		g.drop(err.Error())
		return
	}
	g.mu.Lock()
	g.status.Active = true
	g.mu.Unlock()
	g.report()
}

// misfit says why the GPU plan does not fit the device ("" when it does).
// On unified memory the process plan decides, with the GPU lines in it.
func (g *gpuBackend) misfit() string {
	gp, info := g.status.Plan, g.dev.Info()
	switch {
	case gp == nil:
		return "no GPU plan"
	case !info.Unified && gp.DeviceBytes > info.DeviceMemory*19/20:
		return fmt.Sprintf("the GPU plan needs %s of device memory, %s has %s", plan.SizeText(gp.DeviceBytes), info.Name, plan.SizeText(info.DeviceMemory))
	}
	return ""
}

// drop stops using the device, logging why. The device stays open until
// Close: a model that fell back mid-forward no longer calls it.
func (g *gpuBackend) drop(reason string) {
	g.mu.Lock()
	g.status.Active = false
	g.status.Reason = reason
	g.mu.Unlock()
	g.report()
}

func (g *gpuBackend) report() {
	if g.log == nil {
		return
	}
	st := g.Status()
	switch {
	case st.Active:
		fmt.Fprintf(g.log, "gpu: prefill on %s\n", st.Device)
	case st.Mode == gpuOff, st.Mode == gpuAuto && !g.found:
	default:
		fmt.Fprintf(g.log, "gpu: not used (%s); prefill runs on the CPU\n", st.Reason)
	}
}

// Status is the GPU's current status.
func (g *gpuBackend) Status() gpuStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// Close closes the device; call it after the model's last forward.
func (g *gpuBackend) Close() {
	g.mu.Lock()
	dev := g.dev
	g.dev = nil
	g.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

// inspectGPU says which device prefill of the model would run on and the
// GPU plan at the default context, without loading the model.
func inspectGPU(mode string, cfg *config.Config, w plan.Weights) gpuStatus {
	g := openGPU(mode, nil)
	defer g.Close()
	if g.dev == nil {
		return g.Status()
	}
	g.linesFor(cfg, w, min(plan.DefaultContext, cfg.MaxPositionEmbeddings), 0)
	st := g.Status()
	if reason := g.misfit(); reason != "" {
		st.Reason = reason
		return st
	}
	st.Active = true
	return st
}

// printInspectGPU is the GPU line of spool inspect.
func printInspectGPU(out io.Writer, st gpuStatus) error {
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
