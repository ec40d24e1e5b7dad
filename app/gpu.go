package main

import (
	"errors"
	"fmt"
	"io"
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
type gpuBackend struct {
	log io.Writer

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
	g.dev = dev
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
	return g.linesFor(d.Config, w, context)
}

// linesFor is planLines for a config and its weights.
func (g *gpuBackend) linesFor(cfg *config.Config, w plan.Weights, context int) []plan.Item {
	info := g.dev.Info()
	gp := plan.GPU(cfg, w, plan.GPUOptions{Context: context, Unified: info.Unified, InPlace: info.InPlace})
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
	gp, info := g.status.Plan, g.dev.Info()
	switch {
	case gp == nil:
		g.drop("no GPU plan")
		return
	case !info.Unified && gp.DeviceBytes > info.DeviceMemory*19/20:
		g.drop(fmt.Sprintf("the GPU plan needs %s of device memory, %s has %s", plan.SizeText(gp.DeviceBytes), info.Name, plan.SizeText(info.DeviceMemory)))
		return
	case info.Unified && !p.Fits:
		g.drop("the memory plan with the GPU lines does not fit")
		return
	}
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
	case st.Mode == gpuOff:
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
